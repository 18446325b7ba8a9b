package tickets

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/logbook/logbook/engine/eventstore"
)

// Audit is what a check of the whole log found.
type Audit struct {
	Events  int `json:"events"`  // ticket events read
	Tickets int `json:"tickets"` // tickets with any history
	Booked  int `json:"booked"`  // tickets held at the end
	// Violations: a ticket booked while someone held it, or returned by
	// someone who did not hold it. There must be none.
	Violations []string `json:"violations"`
}

// AuditLog reads every ticket's history from the log, in order, and
// checks that no seat was ever sold twice: each TicketBooked finds the
// ticket free, each TicketReturned is by its holder.
func AuditLog(ctx context.Context, store eventstore.Store) (Audit, error) {
	a := Audit{Violations: []string{}}
	holder := map[string]string{}
	for from := uint64(1); ; {
		evs, err := store.ReadTag(ctx, Kind, from, 4096)
		if err != nil {
			return a, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			from = ev.Position + 1
			id, ok := strings.CutPrefix(ev.Stream, Kind+"-")
			if !ok {
				continue
			}
			var e struct {
				Owner string `json:"owner"`
			}
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return a, fmt.Errorf("event %d: %w", ev.Position, err)
			}
			a.Events++
			cur, seen := holder[id]
			if !seen {
				a.Tickets++
			}
			switch ev.Type {
			case "TicketBooked":
				if cur != "" {
					a.Violations = append(a.Violations, fmt.Sprintf("%s booked by %s at position %d while held by %s", id, e.Owner, ev.Position, cur))
				}
				holder[id] = e.Owner
			case "TicketReturned":
				if cur != e.Owner {
					a.Violations = append(a.Violations, fmt.Sprintf("%s returned by %s at position %d while held by %q", id, e.Owner, ev.Position, cur))
				}
				holder[id] = ""
			}
		}
	}
	for _, h := range holder {
		if h != "" {
			a.Booked++
		}
	}
	return a, nil
}
