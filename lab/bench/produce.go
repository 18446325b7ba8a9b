package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/lab/stats"
)

// The mass-notification thesis's Figure 6.1 ("Average process time to
// send 100 Kafka events") sent the same 100 Avro-serialized events to a
// local Kafka cluster and to a managed one, to show that producing, not
// processing, bounded its pipeline. RunProduce sends 100 such events to a
// Kafka broker and appends the same 100 events to logbook's own log, run
// after run, and reports the time each took.

// notificationSchema is the Avro schema of the events sent: a push
// notification for one user, as the pipeline's build stage emits them.
const notificationSchema = `{"type":"record","name":"Notification","namespace":"logbook.notify","fields":[` +
	`{"name":"notification_id","type":"string"},` +
	`{"name":"user_id","type":"long"},` +
	`{"name":"club","type":"string"},` +
	`{"name":"title","type":"string"},` +
	`{"name":"body","type":"string"},` +
	`{"name":"device_token","type":"string"},` +
	`{"name":"created_unix_millis","type":"long"}]}`

type notificationRecord struct {
	NotificationID string `avro:"notification_id"`
	UserID         int64  `avro:"user_id"`
	Club           string `avro:"club"`
	Title          string `avro:"title"`
	Body           string `avro:"body"`
	DeviceToken    string `avro:"device_token"`
	Created        int64  `avro:"created_unix_millis"`
}

// ProduceConfig describes `logbook bench produce`.
type ProduceConfig struct {
	Brokers []string
	Topic   string // made if missing, one partition
	Events  int    // per run (the figure's 100)
	Runs    int
}

// ProduceRow is one way of sending the events: the time to send all of a
// run's events, over the runs.
type ProduceRow struct {
	Target string  `json:"target"` // kafka or logbook
	Mode   string  `json:"mode"`   // batch: all at once, then wait; one-by-one: wait for each
	Runs   int     `json:"runs"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	MeanMS float64 `json:"mean_ms"`
}

// ProduceResult is what `logbook bench produce` prints.
type ProduceResult struct {
	Events      int          `json:"events"`
	ValueBytes  int          `json:"value_bytes"` // one event's Avro value, wire header included
	SchemaID    int          `json:"schema_id"`
	ProduceRows []ProduceRow `json:"rows"`
}

// Rows renders the result as a two-column table.
func (r ProduceResult) Rows() [][2]string {
	rows := [][2]string{
		{"events per run", fmt.Sprint(r.Events)},
		{"Avro value bytes (schema id)", fmt.Sprintf("%d (%d)", r.ValueBytes, r.SchemaID)},
	}
	for _, x := range r.ProduceRows {
		rows = append(rows, [2]string{fmt.Sprintf("%s, %s (%d runs)", x.Target, x.Mode, x.Runs),
			fmt.Sprintf("p50 %.2f / p99 %.2f / max %.2f / mean %.2f ms", x.P50MS, x.P99MS, x.MaxMS, x.MeanMS)})
	}
	return rows
}

// RunProduce registers the schema in a registry kept in store (under
// "<topic>-value"), then for each run encodes Events notifications in the
// registry's wire format and times sending them to Kafka (acks from every
// in-sync replica, idempotent) and appending them to store (synced), each
// both as one batch and one event at a time.
func RunProduce(ctx context.Context, store eventstore.Store, cfg ProduceConfig) (ProduceResult, error) {
	if cfg.Events <= 0 || cfg.Runs <= 0 || len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return ProduceResult{}, errors.New("bench produce: events and runs must be positive, brokers and topic given")
	}
	reg, err := registry.Open(ctx, store, registry.Options{})
	if err != nil {
		return ProduceResult{}, err
	}
	defer reg.Close()
	id, err := reg.Register(ctx, cfg.Topic+"-value", notificationSchema)
	if err != nil {
		return ProduceResult{}, fmt.Errorf("bench produce: register schema: %w", err)
	}
	schema := avro.MustParse(notificationSchema)

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(cfg.Topic), kgo.ProducerLinger(0))
	if err != nil {
		return ProduceResult{}, err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, cfg.Topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return ProduceResult{}, fmt.Errorf("bench produce: create topic %s: %w", cfg.Topic, err)
	}

	values := func(run int) ([][]byte, error) {
		out := make([][]byte, cfg.Events)
		for i := range out {
			body, err := avro.Marshal(schema, notificationRecord{
				NotificationID: fmt.Sprintf("n-%d-%d", run, i), UserID: int64(run*cfg.Events + i), Club: "club-7",
				Title: "Training moved", Body: "Thursday's training starts at 19:30 on pitch 2.",
				DeviceToken: fmt.Sprintf("device-%032d", i), Created: time.Now().UnixMilli(),
			})
			if err != nil {
				return nil, err
			}
			out[i] = append(registry.AppendWireHeader(make([]byte, 0, 5+len(body)), id), body...)
		}
		return out, nil
	}
	// Warm up: the topic's leader, the client's connections, the store.
	warm, err := values(-1)
	if err != nil {
		return ProduceResult{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = cl.ProduceSync(wctx, &kgo.Record{Value: warm[0]}).FirstErr()
	cancel()
	if err != nil {
		return ProduceResult{}, fmt.Errorf("bench produce: warm-up: %w", err)
	}

	type way struct {
		target, mode string
		send         func(run int, vs [][]byte) error
	}
	stream := "produce-" + newRunID()
	ways := []way{
		{"kafka", "batch", func(_ int, vs [][]byte) error {
			recs := make([]*kgo.Record, len(vs))
			for i, v := range vs {
				recs[i] = &kgo.Record{Value: v}
			}
			return cl.ProduceSync(ctx, recs...).FirstErr()
		}},
		{"kafka", "one-by-one", func(_ int, vs [][]byte) error {
			for _, v := range vs {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"logbook", "batch", func(run int, vs [][]byte) error {
			evs := make([]eventstore.NewEvent, len(vs))
			for i, v := range vs {
				evs[i] = eventstore.NewEvent{Type: "notify.Notification", Data: v}
			}
			_, err := store.Append(ctx, fmt.Sprintf("%s-b%d", stream, run), eventstore.NoStream, evs)
			return err
		}},
		{"logbook", "one-by-one", func(run int, vs [][]byte) error {
			s := fmt.Sprintf("%s-o%d", stream, run)
			for i, v := range vs {
				if _, err := store.Append(ctx, s, eventstore.Exactly(uint64(i)), []eventstore.NewEvent{{Type: "notify.Notification", Data: v}}); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	res := ProduceResult{Events: cfg.Events, ValueBytes: len(warm[0]), SchemaID: id}
	times := make([][]time.Duration, len(ways))
	for run := range cfg.Runs {
		vs, err := values(run)
		if err != nil {
			return res, err
		}
		// The ways take turns within each run, so a slow moment of the
		// machine falls on all of them.
		for w, x := range ways {
			t0 := time.Now()
			if err := x.send(run, vs); err != nil {
				return res, fmt.Errorf("bench produce: %s %s: %w", x.target, x.mode, err)
			}
			times[w] = append(times[w], time.Since(t0))
		}
	}
	for w, x := range ways {
		s := stats.Summarize(times[w])
		var sum time.Duration
		for _, d := range times[w] {
			sum += d
		}
		res.ProduceRows = append(res.ProduceRows, ProduceRow{Target: x.target, Mode: x.mode, Runs: cfg.Runs,
			P50MS: s.P50, P99MS: s.P99, MaxMS: s.Max, MeanMS: stats.Round(stats.MS(sum)/float64(cfg.Runs), 3)})
	}
	return res, nil
}
