package window_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/window"
)

// benchDefinition is the aggregation of the windows benchmark workload
// (logbook bench windows): notifications counted per sender and type in
// one-minute windows rolled up to hours and days, with their size summed.
// An event's payload is its time (8 bytes of Unix nanoseconds), the
// sender (2 bytes), the type (1 byte) and the size (4 bytes), big-endian.
func benchDefinition(senders, types int) window.Definition {
	sn := make([]string, senders)
	for i := range sn {
		sn[i] = fmt.Sprintf("sender-%04d", i)
	}
	tn := make([]string, types)
	for i := range tn {
		tn[i] = fmt.Sprintf("type-%02d", i)
	}
	return window.Definition{
		Name:    "notifications",
		Window:  window.Tumbling(time.Minute),
		RollUps: []time.Duration{time.Hour, 24 * time.Hour},
		Grace:   2 * time.Minute,
		Dims:    []string{"sender", "type"},
		Values:  []string{"size"},
		Extract: func(ev *eventstore.Event, r *window.Record) bool {
			if ev.Type != "notification-sent" || len(ev.Data) != 15 {
				return false
			}
			s, t := int(binary.BigEndian.Uint16(ev.Data[8:])), int(ev.Data[10])
			if s >= len(sn) || t >= len(tn) {
				return false
			}
			r.Time = time.Unix(0, int64(binary.BigEndian.Uint64(ev.Data)))
			r.Dims[0], r.Dims[1] = sn[s], tn[t]
			r.Values[0] = float64(binary.BigEndian.Uint32(ev.Data[11:]))
			return true
		},
	}
}

// benchEvent is event number pos of the workload, at time t.
func benchEvent(rng *rand.Rand, pos uint64, t int64, senders, types int) eventstore.Event {
	d := binary.BigEndian.AppendUint64(make([]byte, 0, 15), uint64(t))
	d = binary.BigEndian.AppendUint16(d, uint16(rng.IntN(senders)))
	d = append(d, byte(rng.IntN(types)))
	d = binary.BigEndian.AppendUint32(d, uint32(100+rng.IntN(10_000)))
	return eventstore.Event{Position: pos, Type: "notification-sent", Data: d}
}

// BenchmarkApply is the window update: batches of 1,000 events (what a
// projection runner hands a view when it follows the log live) applied to
// the aggregation, 1,000 senders and 20 types, time advancing 10 ms an
// event so that windows close and roll up as they would live.
func BenchmarkApply(b *testing.B) {
	const batch, senders, types = 1000, 1000, 20
	ctx := context.Background()
	agg, err := window.Open(b.TempDir(), benchDefinition(senders, types), window.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer agg.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	events := make([]eventstore.Event, batch)
	var pos uint64
	for b.Loop() {
		for i := range events {
			pos++
			events[i] = benchEvent(rng, pos, start+int64(pos)*int64(10*time.Millisecond), senders, types)
		}
		if err := agg.Apply(ctx, events); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDayQuery is the windows benchmark's pull query — one type of
// 20, grouped by sender, over the day — on a day of 2,000,000 events
// aggregated in batches of 65,536 and then 1,000 (a live ingest's).
func BenchmarkDayQuery(b *testing.B) {
	const senders, types = 1000, 20
	ctx := context.Background()
	agg, err := window.Open(b.TempDir(), benchDefinition(senders, types), window.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer agg.Close()
	day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 2_000_000
	var batch []eventstore.Event
	for i := range n {
		t := day.UnixNano() + int64(float64(24*time.Hour)*float64(i)/n)
		batch = append(batch, benchEvent(rng, uint64(i+1), t, senders, types))
		if size := map[bool]int{true: 65536, false: 1000}[i < n*9/10]; len(batch) == size || i == n-1 {
			if err := agg.Apply(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = nil
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := agg.Query(ctx, window.Query{
			From: day, To: day.Add(24 * time.Hour), Unit: 24 * time.Hour,
			Filter: map[string]string{"type": fmt.Sprintf("type-%02d", i%types)}, GroupBy: []string{"sender"},
		})
		if err != nil || len(res.Rows) != senders {
			b.Fatalf("%d rows, %v", len(res.Rows), err)
		}
	}
}
