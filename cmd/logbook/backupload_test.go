package main

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// loadAck is an append acknowledged while a backup (or a dump) was
// taken: its stream, the position of its first event, its events' ids
// when the writer knows them (else one event, known by its stream), and
// whether it was acknowledged before the backup began.
type loadAck struct {
	stream string
	first  uint64
	ids    []eventstore.ID
	before bool
}

// logByPosition reads a whole log, by position.
func logByPosition(t *testing.T, r interface {
	ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error)
}) map[uint64]eventstore.Event {
	t.Helper()
	byPos := map[uint64]eventstore.Event{}
	for from := uint64(1); ; {
		page, err := r.ReadAll(t.Context(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return byPos
		}
		for _, ev := range page {
			byPos[ev.Position] = ev
		}
		from = page[len(page)-1].Position + 1
	}
}

// checkBackupUnderLoad checks a log restored from a backup that holds
// positions 1 … head, taken under the load acks: the log holds exactly
// head events; every append acknowledged at or below head is there whole
// (the same ids, or the same stream), none straddles head, none
// acknowledged before the backup began lies past it; when onlyLoad (the
// log holds nothing but the load), every event comes from a whole
// acknowledged append. The load must have had appends acknowledged both
// before and after the backup began, or it tested nothing.
func checkBackupUnderLoad(t *testing.T, byPos map[uint64]eventstore.Event, head uint64, acks []loadAck, onlyLoad bool) {
	t.Helper()
	if uint64(len(byPos)) != head {
		t.Fatalf("restored log holds %d events, the backup's position is %d", len(byPos), head)
	}
	var before, after int
	var whole uint64
	for _, a := range acks {
		if a.before {
			before++
		} else {
			after++
		}
		n := max(len(a.ids), 1)
		last := a.first + uint64(n) - 1
		switch {
		case last <= head:
			for k := range n {
				ev, ok := byPos[a.first+uint64(k)]
				if !ok || ev.Stream != a.stream || (a.ids != nil && ev.ID != a.ids[k]) {
					t.Fatalf("append to %s acknowledged at %d (event %d) missing or different in the restored log: %+v", a.stream, a.first, k, ev)
				}
			}
			whole += uint64(n)
		case a.first > head:
			if a.before {
				t.Fatalf("append to %s acknowledged before the backup began is at %d, past its position %d", a.stream, a.first, head)
			}
		default:
			t.Fatalf("append at %d–%d straddles the backup's position %d", a.first, last, head)
		}
	}
	t.Logf("backup at position %d; %d appends acknowledged before it began, %d after", head, before, after)
	if before == 0 || after == 0 {
		t.Fatalf("load too light to test anything: %d appends before the backup, %d after", before, after)
	}
	if onlyLoad && whole != head {
		t.Fatalf("the restored log holds %d events not from a whole acknowledged append", head-whole)
	}
}
