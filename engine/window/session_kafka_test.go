package window

import (
	"testing"
	"time"
)

// sec is an event of sender s at second n after 10:00.
func sec(n int, s string) tev {
	return tev{T: at("2025-03-01T10:00:00Z").Add(time.Duration(n) * time.Second).UnixNano(), Sender: s, Kind: "x", V: 1, User: "u"}
}

// An out-of-order event inside a session that is still open joins it,
// though its own window [t, t+gap) has closed: Kafka Streams merges an
// event with the sessions it overlaps before it decides lateness.
func TestSessionOutOfOrderJoinsOpenSession(t *testing.T) {
	for _, batch := range []int{1, 5} {
		def := testDef("ooo", Session(10*time.Second), 0)
		a := buildBatch(t, def, []tev{sec(50, "a"), sec(58, "a"), sec(66, "a"), sec(74, "a"), sec(55, "a")}, batch)
		expect(t, query(t, a, Query{GroupBy: []string{"sender"}}), `
2025-03-01T10:00:50Z..2025-03-01T10:01:24Z sender=a n=5 late=0 sum=5 min=1 max=1 avg=1 users=1
`)
	}
}

// Sessions close as in Kafka Streams: a session ending at end (last
// event + gap) takes events while end + grace >= stream time, and
// closes only once stream time is past it.
func TestSessionCloseBoundary(t *testing.T) {
	def := testDef("edge", Session(10*time.Second), 0)
	evs := []tev{
		sec(50, "a"),
		sec(60, "b"), // stream time 60: a's session [50, 60) is not closed yet
		sec(55, "a"), // joins it
		sec(50, "c"), // its own window [50, 60) is still open: a session
	}
	a := buildBatch(t, def, evs, 1)
	expect(t, query(t, a, Query{GroupBy: []string{"sender"}}), `
2025-03-01T10:00:50Z..2025-03-01T10:01:00Z sender=c n=1 late=0 sum=1 min=1 max=1 avg=1 users=1
2025-03-01T10:00:50Z..2025-03-01T10:01:05Z sender=a n=2 late=0 sum=2 min=1 max=1 avg=1 users=1
2025-03-01T10:01:00Z..2025-03-01T10:01:10Z sender=b n=1 late=0 sum=1 min=1 max=1 avg=1 users=1
`)
	evs = append(evs,
		sec(61, "b"), // stream time 61: c's session closes
		sec(51, "c"), // its own window [51, 61) is open, but it falls in c's closed session: late there
		sec(42, "a"), // its own window [42, 52) is closed and it is not inside a's open session: late
	)
	for _, batch := range []int{1, 3, 7} {
		a = buildBatch(t, def, evs, batch)
		expect(t, query(t, a, Query{GroupBy: []string{"sender"}}), `
2025-03-01T10:00:42Z..2025-03-01T10:00:52Z sender=a n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:00:50Z..2025-03-01T10:01:00Z sender=c n=1 late=1 sum=1 min=1 max=1 avg=1 users=1 closed
2025-03-01T10:00:50Z..2025-03-01T10:01:05Z sender=a n=2 late=0 sum=2 min=1 max=1 avg=1 users=1
2025-03-01T10:01:00Z..2025-03-01T10:01:11Z sender=b n=2 late=0 sum=2 min=1 max=1 avg=1 users=1
`)
	}
}
