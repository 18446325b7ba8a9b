package kafkabus

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore"
)

// Record is an event as read back from the topic, with where it was.
type Record struct {
	Event     eventstore.Event
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// ReadTopic returns every committed event in topic, each partition's in
// offset order, up to the partitions' last stable offsets as of the call:
// what a consumer that starts now would receive. It is for audits and
// tests (did every position arrive exactly once?); it holds the whole
// topic in memory.
func ReadTopic(ctx context.Context, cfg Config, topic string) ([]Record, error) {
	var out []Record
	err := readCommitted(ctx, cfg, topic, func(r *kgo.Record) error {
		ev, err := decodeRecord(r)
		if err != nil {
			return err
		}
		out = append(out, Record{Event: ev, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp})
		return nil
	})
	return out, err
}

// ReadRecords is ReadTopic for a topic of any format: the committed data
// records as they are, each partition's in offset order.
func ReadRecords(ctx context.Context, cfg Config, topic string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := readCommitted(ctx, cfg, topic, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// readCommitted hands fn every committed data record of topic up to the
// partitions' last stable offsets as of the call.
func readCommitted(ctx context.Context, cfg Config, topic string, fn func(*kgo.Record) error) error {
	admCl, err := cfg.client()
	if err != nil {
		return err
	}
	adm := kadm.NewClient(admCl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		admCl.Close()
		return fmt.Errorf("kafkabus: start offsets of %s: %w", topic, err)
	}
	ends, err := stableOffsets(ctx, adm, topic)
	admCl.Close()
	if err != nil {
		return fmt.Errorf("kafkabus: stable offsets of %s: %w", topic, err)
	}
	want := make(map[int32]int64)
	offsets := make(map[int32]kgo.Offset)
	ends.Each(func(o kadm.ListedOffset) {
		// A partition retention has emptied has nothing to wait for.
		if start, _ := starts.Lookup(topic, o.Partition); o.Offset > start.Offset {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().At(start.Offset)
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := cfg.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	// A partition is done once a record (data or control) at or past its
	// last stable offset minus one has arrived.
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("kafkabus: read %s: %w", topic, ferr)
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() && derr == nil {
				derr = fn(r)
			}
			if r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
		if derr != nil {
			return derr
		}
	}
	return nil
}

// settleWait bounds how long ReadTopic waits for the last stable offsets
// to reach the high watermarks.
const settleWait = 5 * time.Second

// stableOffsets lists the partitions' last stable offsets. A transaction's
// commit returns before its markers are written, so for a moment after a
// publisher commits the stable offset lags the records it made readable;
// while it is below the high watermark this waits (at most settleWait: a
// transaction still open on a live topic keeps it below for longer, and
// then what is stable now is the answer).
func stableOffsets(ctx context.Context, adm *kadm.Client, topic string) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(settleWait)
	for {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			return nil, err
		}
		high, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = high.Error()
		}
		if err != nil {
			return nil, err
		}
		settled := true
		stable.Each(func(o kadm.ListedOffset) {
			if h, ok := high.Lookup(topic, o.Partition); ok && o.Offset < h.Offset {
				settled = false
			}
		})
		if settled || time.Now().After(deadline) {
			return stable, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
