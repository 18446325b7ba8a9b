package tickets

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// Search is the search read model: who holds which ticket, kept from the
// TicketBooked and TicketReturned events in log order. The catalogue says
// which tickets exist, so only booked tickets take memory.
type Search struct {
	cat Catalogue
	mem *projection.Memory[searchState]

	cacheMu    sync.RWMutex
	cache      map[Query]cachedAnswer // encoded answers, each valid at one position
	cacheBytes int                    // of the cached answers
}

// cachedAnswer is a query's JSON answer at the view position pos.
type cachedAnswer struct {
	pos  uint64
	body []byte
}

// maxCachedBytes bounds the answer cache by the bytes of its answers
// (one answer may list 1,000 tickets, about 70 KB, so a bound on entries
// alone let it reach hundreds of MiB); when an answer would take it over,
// it starts over, which costs one recomputation per distinct query.
// Queries by owner are as many as owners, so the bound matters.
const maxCachedBytes = 32 << 20

// entryBytes is what one cached answer is counted as: its body, its key's
// strings and the map entry's own size (small answers to many owners'
// queries add up too).
func entryBytes(q Query, body []byte) int { return len(body) + len(q.Sport) + len(q.Owner) + 96 }

type searchState struct {
	owners map[string]map[int]string // sport → ticket number → owner
}

// NewSearch returns an empty view of cat's tickets.
func NewSearch(cat Catalogue) *Search {
	s := &Search{cat: cat}
	s.mem = projection.NewMemory(searchState{owners: map[string]map[int]string{}}, s.apply)
	return s
}

// Checkpoint and Apply make Search a projection.View.
func (s *Search) Checkpoint(ctx context.Context) (uint64, error) { return s.mem.Checkpoint(ctx) }

// Apply implements projection.View.
func (s *Search) Apply(ctx context.Context, batch []eventstore.Event) error {
	return s.mem.Apply(ctx, batch)
}

func (s *Search) apply(st *searchState, ev eventstore.Event) error {
	id, ok := strings.CutPrefix(ev.Stream, Kind+"-")
	if !ok {
		return nil
	}
	t, err := s.cat.Ticket(id)
	if err != nil {
		// A ticket of a sport this server's catalogue lacks (the store
		// was written with a larger one): not searchable here.
		return nil
	}
	n := ticketNumber(id)
	var e struct {
		Owner string `json:"owner"`
	}
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return fmt.Errorf("decode %s: %w", ev.Type, err)
	}
	switch ev.Type {
	case "TicketBooked":
		m := st.owners[t.Sport]
		if m == nil {
			m = map[int]string{}
			st.owners[t.Sport] = m
		}
		m[n] = e.Owner
	case "TicketReturned":
		delete(st.owners[t.Sport], n)
	}
	return nil
}

func ticketNumber(id string) int {
	_, num, _ := strings.Cut(id, ".")
	n := 0
	for _, c := range num {
		n = n*10 + int(c-'0')
	}
	return n
}

// Query selects tickets of one sport.
type Query struct {
	Sport     string
	Owner     string // only this owner's tickets
	Day       int    // only this day (0: any)
	Available bool   // only tickets nobody holds
	Limit     int    // at most this many (1–1000)
}

// MaxLimit bounds one search's answer.
const MaxLimit = 1000

// Validate checks a query against the catalogue.
func (q Query) Validate(cat Catalogue) error {
	switch {
	case cat.SportIndex(q.Sport) < 0:
		return fmt.Errorf("%w: sport %q", ErrNotFound, q.Sport)
	case q.Owner != "" && !ValidOwner(q.Owner):
		return invalid("owner %q: want 1–64 letters, digits, spaces or ._@-", q.Owner)
	case q.Owner != "" && q.Available:
		return invalid("owner and available exclude each other")
	case q.Day < 0 || q.Day > cat.Days:
		return invalid("day %d: want 1–%d", q.Day, cat.Days)
	case q.Limit < 1 || q.Limit > MaxLimit:
		return invalid("limit %d: want 1–%d", q.Limit, MaxLimit)
	}
	return nil
}

// Listing is a ticket as search shows it: whether it is available, but
// not who holds it — unless the query asked for one owner's tickets.
type Listing struct {
	ID        string `json:"id"`
	Sport     string `json:"sport"`
	Day       int    `json:"day"`
	Seat      int    `json:"seat"`
	Available bool   `json:"available"`
	Owner     string `json:"owner,omitempty"`
}

// Result is a search's answer: the matching tickets in ticket order (at
// most the query's limit), how many match in all, and the log position
// the answer reflects.
type Result struct {
	Tickets  []Listing `json:"tickets"`
	Matches  int       `json:"matches"`
	Position uint64    `json:"position"`
}

// Find answers q, which must be valid.
func (s *Search) Find(q Query) Result {
	var res Result
	s.mem.Read(func(st *searchState, pos uint64) { res = s.find(st, pos, q) })
	return res
}

// FindJSON answers q, which must be valid, encoded as JSON (with a
// trailing newline). The answer to a query changes only when the view
// applies an event, and the position the view reflects names its
// content, so an answer encoded at one position is kept and served again
// until the view moves: under read-heavy load a search costs a map
// lookup instead of a scan of the sport's tickets and an encoding. The
// answer is computed under the view's read lock, so it is exactly the
// one of the position it is cached under.
func (s *Search) FindJSON(q Query) ([]byte, error) {
	var body []byte
	var err error
	s.mem.Read(func(st *searchState, pos uint64) {
		s.cacheMu.RLock()
		c, ok := s.cache[q]
		s.cacheMu.RUnlock()
		if ok && c.pos == pos {
			body = c.body
			return
		}
		if body, err = json.Marshal(s.find(st, pos, q)); err != nil {
			return
		}
		body = append(body, '\n')
		s.cacheMu.Lock()
		if old, ok := s.cache[q]; ok {
			s.cacheBytes -= entryBytes(q, old.body)
		}
		if s.cache == nil || s.cacheBytes+entryBytes(q, body) > maxCachedBytes {
			s.cache, s.cacheBytes = make(map[Query]cachedAnswer), 0
		}
		s.cache[q] = cachedAnswer{pos: pos, body: body}
		s.cacheBytes += entryBytes(q, body)
		s.cacheMu.Unlock()
	})
	return body, err
}

// find answers q at pos from st, under the view's read lock.
func (s *Search) find(st *searchState, pos uint64, q Query) Result {
	res := Result{Tickets: []Listing{}, Position: pos}
	owners := st.owners[q.Sport]
	for n := range s.cat.PerSport {
		if q.Day != 0 && n%s.cat.Days+1 != q.Day {
			continue
		}
		owner := owners[n]
		if (q.Owner != "" && owner != q.Owner) || (q.Available && owner != "") {
			continue
		}
		res.Matches++
		if len(res.Tickets) < q.Limit {
			t := s.cat.nth(q.Sport, n)
			l := Listing{ID: t.ID, Sport: t.Sport, Day: t.Day, Seat: t.Seat, Available: owner == ""}
			if q.Owner != "" {
				l.Owner = owner
			}
			res.Tickets = append(res.Tickets, l)
		}
	}
	return res
}
