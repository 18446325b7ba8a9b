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

// dayQueryDefinition is the windows benchmark's aggregation (the lab's
// bench.WindowsDefinition, kept here so the engine's tests import nothing
// of the lab): one-minute tumbling windows rolled up to hours and days,
// grouped by sender and type, summing a size. An event's data is its
// time (Unix nanoseconds, 8 bytes), sender (2), type (1) and size (4).
func dayQueryDefinition(senders, types int) window.Definition {
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

// BenchmarkDayQuery is the windows benchmark's pull query — one type of
// 20, grouped by sender, over the day — on a day of 2,000,000 events
// aggregated in batches of 65,536 and then 1,000 (a live ingest's).
func BenchmarkDayQuery(b *testing.B) {
	ctx := context.Background()
	def := dayQueryDefinition(1000, 20)
	agg, err := window.Open(b.TempDir(), def, window.Options{})
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
		d := binary.BigEndian.AppendUint64(nil, uint64(t))
		d = binary.BigEndian.AppendUint16(d, uint16(rng.IntN(1000)))
		d = append(d, byte(rng.IntN(20)))
		d = binary.BigEndian.AppendUint32(d, uint32(100+rng.IntN(10_000)))
		batch = append(batch, eventstore.Event{Position: uint64(i + 1), Type: "notification-sent", Data: d})
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
			Filter: map[string]string{"type": fmt.Sprintf("type-%02d", i%20)}, GroupBy: []string{"sender"},
		})
		if err != nil || len(res.Rows) != 1000 {
			b.Fatalf("%d rows, %v", len(res.Rows), err)
		}
	}
}
