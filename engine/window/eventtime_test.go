package window

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logbook/logbook/engine/eventstore"
)

// One event dated far in the future must not move stream time there:
// with it applied, every window of the present would close and every
// later event would be late, for good. It is set aside and counted, as
// are times that Unix nanoseconds cannot hold (after 2262, before 1678),
// and the events after it are counted in their windows.
func TestFutureEventsAreSetAside(t *testing.T) {
	def := testDef("ahead", Tumbling(time.Minute), 2*time.Minute)
	// tev cannot carry a time beyond int64 nanoseconds: V picks one.
	def.Extract = func(e *eventstore.Event, r *Record) bool {
		if !extractTest(e, r) {
			return false
		}
		switch r.Values[0] {
		case -1:
			r.Time = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
		case -2:
			r.Time = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return true
	}
	clock := at("2025-03-01T10:00:00Z")
	st := openStore(t, t.TempDir())
	defer st.Close()
	reg := prometheus.NewRegistry()
	a, err := Open(t.TempDir(), def, Options{Registerer: reg, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendEvents(t, st, []tev{
		ev("2025-03-01T09:59:10Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:00:50Z", "a", "x", 2, "u1"),  // 50 s ahead: within the skew
		ev("2200-01-01T00:00:00Z", "a", "x", 3, "u2"),  // far ahead: set aside
		ev("2025-03-01T10:00:00Z", "a", "x", -1, "u3"), // 2300: set aside
		ev("2025-03-01T10:00:00Z", "a", "x", -2, "u3"), // 1600: set aside
		ev("2025-03-01T09:59:30Z", "a", "x", 4, "u1"),  // counted, not late
		ev("2025-03-01T10:00:20Z", "a", "x", 5, "u2"),
	})
	catchUp(t, st, a, 3)
	res, err := a.Query(context.Background(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, show(res.Rows), `
2025-03-01T09:59:00Z..2025-03-01T10:00:00Z n=2 late=0 sum=5 min=1 max=4 avg=2.5 users=1
2025-03-01T10:00:00Z..2025-03-01T10:01:00Z n=2 late=0 sum=7 min=2 max=5 avg=3.5 users=2
`)
	if !res.StreamTime.Equal(at("2025-03-01T10:00:50Z")) {
		t.Errorf("stream time %s, want 10:00:50", res.StreamTime)
	}
	if res.SetAside != 3 {
		t.Errorf("set aside %d, want 3", res.SetAside)
	}
	if got := testutil.ToFloat64(a.asideC); got != 3 {
		t.Errorf("set-aside metric %v, want 3", got)
	}
	// The count survives a restart.
	dir := a.dir
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, def, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if res, err := b.Query(context.Background(), Query{}); err != nil || res.SetAside != 3 {
		t.Fatalf("after reopening: set aside %d (%v), want 3", res.SetAside, err)
	}
}

// The clock is the event's commit time when it is earlier than Now, so
// that rebuilding later from the log sets aside the same events.
func TestSetAsideFollowsCommitTime(t *testing.T) {
	def := testDef("commit", Tumbling(time.Minute), 0)
	a, err := Open(t.TempDir(), def, Options{Now: func() time.Time { return at("2030-01-01T00:00:00Z") }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	commit := at("2025-03-01T10:00:00Z")
	mk := func(pos uint64, e tev) eventstore.Event {
		var r strings.Builder
		r.WriteString(`{"t":`)
		r.WriteString(itoa(e.T))
		r.WriteString(`,"s":"a","k":"x","v":1,"u":"u"}`)
		return eventstore.Event{Position: pos, Type: "sent", Time: commit, Data: []byte(r.String())}
	}
	batch := []eventstore.Event{
		mk(1, ev("2025-03-01T10:00:30Z", "a", "x", 1, "u")),
		mk(2, ev("2025-03-01T10:05:00Z", "a", "x", 1, "u")), // 5 min after its commit
	}
	if err := a.Apply(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	res, err := a.Query(context.Background(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SetAside != 1 || len(res.Rows) != 1 {
		t.Fatalf("set aside %d, rows %s; want 1 and the 10:00 window only", res.SetAside, show(res.Rows))
	}
}

func itoa(n int64) string {
	var b []byte
	if n < 0 {
		return "-" + itoa(-n)
	}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}
