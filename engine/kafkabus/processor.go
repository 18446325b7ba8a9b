package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logbook/logbook/engine/eventstore"
)

// HandleFunc processes a batch of events. Events of one stream come in
// sequence order, without gaps; events of different streams may be in any
// order relative to each other. A nil return commits the batch.
type HandleFunc func(ctx context.Context, batch []eventstore.Event) error

// Processor consumes the topic in a consumer group: the group's members
// share its partitions, so each event is handled by one member (at least
// once: a member that dies between handling and committing leaves its
// batch to be handled again by whoever takes its partitions over).
//
// Offsets are committed only after handle returned nil. Each commit
// carries, as its metadata, the position of the last event handled from
// the partition. When a member finds that records were deleted between
// that commit and what the partition still holds (the committed offset
// fell below the log start offset, or retention overtook the member), it
// reads the events of that partition's streams in between from the store
// and hands them on first; and an event whose stream's previous event this
// member has not handled, though it handled earlier ones of the stream,
// has the missing ones read from the store. Events of a stream at or below
// the last seq the member handled while it held the partition are dropped,
// so a replay after a failed commit is not handled twice by one process.
type Processor struct {
	cfg    Config
	group  string
	topic  string
	store  eventstore.Store
	handle HandleFunc

	maxBatch int
	running  atomic.Bool
	handled  atomic.Uint64
	filled   atomic.Uint64

	mu    sync.Mutex
	parts map[int32]*partState
	seqs  map[string]streamSeq
}

// partState is what a member knows of a partition it holds.
type partState struct {
	// expect is the offset the member reads from next, if nothing was
	// deleted: the committed offset at assignment, then one past the last
	// record. -1 until known.
	expect int64
	// floor is the position of the last event handled from the partition:
	// every event of the partition up to it has been handled.
	floor uint64
}

type streamSeq struct {
	partition int32
	seq       uint64
}

// ProcessorOption tunes a Processor.
type ProcessorOption func(*Processor)

// WithMaxBatch caps the events of one handle call from Kafka (default
// 1000); events read from the store to fill a gap come on top.
func WithMaxBatch(n int) ProcessorOption {
	return func(p *Processor) { p.maxBatch = n }
}

// NewProcessor returns a member of consumer group group on topic; Run
// starts it. store is where missing events are read from.
func NewProcessor(cfg Config, group, topic string, store eventstore.Store, handle HandleFunc, opts ...ProcessorOption) *Processor {
	p := &Processor{cfg: cfg, group: group, topic: topic, store: store, handle: handle, maxBatch: 1000}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Handled returns how many events this Processor has handed to handle and
// seen succeed.
func (p *Processor) Handled() uint64 { return p.handled.Load() }

// Filled returns how many of them were read from the store because Kafka
// no longer held them.
func (p *Processor) Filled() uint64 { return p.filled.Load() }

const metaPrefix = "logbook/1 pos="

// Run joins the group and handles events until ctx ends (then it leaves
// the group and returns nil) or something fails: handle (its batch is not
// committed; the next member to hold the partitions gets it again), a
// commit, a read from the store. A failed Run leaves the group; start a
// new Processor to rejoin.
func (p *Processor) Run(ctx context.Context) (err error) {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("kafkabus: processor already running")
	}
	defer p.running.Store(false)
	p.mu.Lock()
	p.parts, p.seqs = map[int32]*partState{}, map[string]streamSeq{}
	p.mu.Unlock()

	cl, err := p.cfg.client(
		kgo.ConsumerGroup(p.group),
		kgo.ConsumeTopics(p.topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Partitions change hands only between polls, when everything
		// handled has been committed: a new owner starts where we ended.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.assigned),
		kgo.OnPartitionsRevoked(p.revoked),
		kgo.OnPartitionsLost(p.revoked),
	)
	if err != nil {
		return err
	}
	defer cl.CloseAllowingRebalance()
	partitions, err := partitionCount(ctx, kadm.NewClient(cl), p.topic)
	if err != nil {
		return err
	}
	tp := partitioner(p.topic)
	for {
		fetches := cl.PollRecords(ctx, p.maxBatch)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("kafkabus: processor %s: fetching %s: %w", p.group, p.topic, ferr)
		}
		if err := p.process(ctx, cl, fetches, tp, partitions); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		cl.AllowRebalance()
	}
}

// assigned learns, for each partition the member now holds, where the
// group left off: the committed offset, and from its metadata the last
// position handled.
func (p *Processor) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, p.group)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range assigned[p.topic] {
		st := &partState{expect: -1}
		if o, ok := offsets.Lookup(p.topic, part); err == nil && ok && o.Err == nil && o.At >= 0 {
			st.expect = o.At
			st.floor, _ = strconv.ParseUint(strings.TrimPrefix(o.Metadata, metaPrefix), 10, 64)
		} else if err == nil && (!ok || o.At < 0) {
			st.expect = 0 // the group never committed here: from the start
		}
		p.parts[part] = st
	}
}

// revoked forgets the partitions (and their streams) the member no longer
// holds: their next owner may handle more of those streams meanwhile.
func (p *Processor) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gone := map[int32]bool{}
	for _, part := range revoked[p.topic] {
		gone[part] = true
		delete(p.parts, part)
	}
	for s, q := range p.seqs {
		if gone[q.partition] {
			delete(p.seqs, s)
		}
	}
}

// process hands one poll's records, with whatever the store must fill in,
// to handle, and commits them.
func (p *Processor) process(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches, tp kgo.TopicPartitioner, partitions int) error {
	// Where the group left off decides whether records were lost to
	// retention; without it a gap would go unnoticed. Ask again for the
	// partitions whose committed offset could not be read at assignment.
	if unknown := p.unknownPartitions(fetches); len(unknown) > 0 {
		p.assigned(ctx, cl, map[string][]int32{p.topic: unknown})
		if still := p.unknownPartitions(fetches); len(still) > 0 {
			return fmt.Errorf("kafkabus: processor %s: committed offsets of partitions %v unknown", p.group, still)
		}
	}
	batch, commits, floors, seqs, filled, err := p.gather(ctx, fetches, tp, partitions)
	if err != nil {
		return fmt.Errorf("kafkabus: processor %s: %w", p.group, err)
	}
	if len(batch) > 0 {
		if err := p.handle(ctx, batch); err != nil {
			return fmt.Errorf("kafkabus: processor %s: handle: %w", p.group, err)
		}
	}
	p.handled.Add(uint64(len(batch)))
	p.filled.Add(uint64(filled))
	// The batch is handled: commit it even if ctx ended meanwhile, or the
	// next owner would handle it again.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	cctx = kgo.PreCommitFnContext(cctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				cp := &req.Topics[i].Partitions[j]
				if f, ok := floors[cp.Partition]; ok {
					m := metaPrefix + strconv.FormatUint(f, 10)
					cp.Metadata = &m
				}
			}
		}
		return nil
	})
	recs := make([]*kgo.Record, 0, len(commits))
	for _, r := range commits {
		recs = append(recs, r)
	}
	if len(recs) > 0 {
		if err := cl.CommitRecords(cctx, recs...); err != nil {
			return fmt.Errorf("kafkabus: processor %s: commit: %w", p.group, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for part, r := range commits {
		if st := p.parts[part]; st != nil {
			st.expect, st.floor = r.Offset+1, floors[part]
		}
	}
	for s, q := range seqs {
		// A partition lost since gather may be handled elsewhere now:
		// keeping its streams' progress would later look like a gap.
		if p.parts[q.partition] != nil {
			p.seqs[s] = q
		}
	}
	return nil
}

// unknownPartitions lists the partitions with records in fetches whose
// committed offset this member does not know.
func (p *Processor) unknownPartitions(fetches kgo.Fetches) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int32
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Topic != p.topic || len(fp.Records) == 0 {
			return
		}
		if st := p.parts[fp.Partition]; st == nil || st.expect < 0 {
			out = append(out, fp.Partition)
		}
	})
	return out
}

// gather builds the batch of one poll: its records, less those this member
// handled already, plus what the store must fill in. It also returns the
// last record and position of each partition, to commit, and the streams'
// progress, to keep once committed. The lock is not held past it: kgo's
// callbacks take it, and kgo may wait for them during a commit.
func (p *Processor) gather(ctx context.Context, fetches kgo.Fetches, tp kgo.TopicPartitioner, partitions int) (
	batch []eventstore.Event, commits map[int32]*kgo.Record, floors map[int32]uint64, seqs map[string]streamSeq, filled int, err error,
) {
	p.mu.Lock()
	defer p.mu.Unlock()
	commits, floors, seqs = map[int32]*kgo.Record{}, map[int32]uint64{}, map[string]streamSeq{}
	lastSeq := func(stream string) (uint64, bool) {
		if q, ok := seqs[stream]; ok {
			return q.seq, true
		}
		q, ok := p.seqs[stream]
		return q.seq, ok
	}
	// deliver adds ev unless this member handled it already, reading from
	// the store the events of its stream it skipped.
	deliver := func(part int32, ev eventstore.Event) error {
		last, known := lastSeq(ev.Stream)
		if known && ev.Seq <= last {
			return nil
		}
		if known && ev.Seq > last+1 {
			gap, err := p.readStream(ctx, ev.Stream, last+1, ev.Seq-1)
			if err != nil {
				return err
			}
			batch = append(batch, gap...)
			filled += len(gap)
		}
		batch = append(batch, ev)
		seqs[ev.Stream] = streamSeq{partition: part, seq: ev.Seq}
		return nil
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err != nil || fp.Topic != p.topic || len(fp.Records) == 0 {
			return
		}
		st := p.parts[fp.Partition]
		if st == nil {
			st = &partState{expect: -1}
			p.parts[fp.Partition] = st
		}
		floor := st.floor
		for i, r := range fp.Records {
			var ev eventstore.Event
			if ev, err = decodeRecord(r); err != nil {
				return
			}
			// Records between where we left off and the log start are
			// gone: the partition's events between the last one handled
			// and this one come from the store.
			if i == 0 && st.expect >= 0 && fp.LogStartOffset > st.expect && ev.Position > floor+1 {
				var lost []eventstore.Event
				if lost, err = p.readPartition(ctx, tp, partitions, fp.Partition, floor+1, ev.Position-1); err != nil {
					return
				}
				for _, l := range lost {
					if err = deliver(fp.Partition, l); err != nil {
						return
					}
					filled++
				}
			}
			if err = deliver(fp.Partition, ev); err != nil {
				return
			}
			floor = ev.Position
		}
		commits[fp.Partition] = fp.Records[len(fp.Records)-1]
		floors[fp.Partition] = floor
	})
	return batch, commits, floors, seqs, filled, err
}

// readStream reads seqs from..to of stream from the store.
func (p *Processor) readStream(ctx context.Context, stream string, from, to uint64) ([]eventstore.Event, error) {
	var out []eventstore.Event
	for from <= to {
		evs, err := p.store.ReadStream(ctx, stream, from, int(min(to-from+1, 1000)))
		if errors.Is(err, eventstore.ErrStreamDeleted) || errors.Is(err, eventstore.ErrStreamTombstoned) {
			return out, nil // removed from the store (eventstore.Deleter)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s seq %d-%d from the store: %w", stream, from, to, err)
		}
		if len(evs) == 0 {
			// Seqs from..to were truncated away, or the store is behind.
			if v, err := p.store.StreamVersion(ctx, stream); err == nil && v >= to {
				return out, nil
			}
			return nil, fmt.Errorf("the store lacks %s seq %d", stream, from)
		}
		// evs[0].Seq > from: the seqs before it were removed from the
		// store (truncated), not lost.
		for _, ev := range evs {
			if ev.Seq > to {
				break
			}
			out = append(out, ev)
			from = ev.Seq + 1
		}
	}
	return out, nil
}

// readPartition reads positions from..to from the store and keeps the
// events whose stream the publisher put in partition part.
func (p *Processor) readPartition(ctx context.Context, tp kgo.TopicPartitioner, partitions int, part int32, from, to uint64) ([]eventstore.Event, error) {
	var out []eventstore.Event
	for from <= to {
		evs, err := p.store.ReadAll(ctx, from, int(min(to-from+1, 1000)))
		if err != nil {
			return nil, fmt.Errorf("reading positions %d-%d from the store: %w", from, to, err)
		}
		if len(evs) == 0 {
			if h, err := p.store.Head(ctx); err == nil && h >= to {
				return out, nil // from..to were all removed (eventstore.Deleter)
			}
			return nil, fmt.Errorf("the store lacks position %d", from)
		}
		for _, ev := range evs {
			if ev.Position > to {
				return out, nil
			}
			if partitionOf(tp, ev.Stream, partitions) == part {
				out = append(out, ev)
			}
			from = ev.Position + 1
		}
	}
	return out, nil
}
