package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TransformFunc handles the records of one poll and hands what it makes
// of them to emit, as it goes. It may be handed the same records again
// (after a crash, or after a rebalance aborted the transaction): with
// transactions, only the records of the run whose transaction committed
// are ever read downstream. Side effects outside Kafka are not undone by
// an abort: they must be idempotent.
type TransformFunc func(ctx context.Context, in []*kgo.Record, emit func(*kgo.Record)) error

// TransformerConfig configures a Transformer.
type TransformerConfig struct {
	Topic string // read
	Group string // the consumer group the stage's processes share
	// TransactionalID names this process's transactions; every process
	// of the group needs its own. A process restarted with the same ID
	// fences its predecessor and aborts the transaction it left open at
	// once; a new ID leaves that transaction to TransactionTimeout.
	TransactionalID string
	MaxBatch        int           // records per poll (default 500)
	TxnTimeout      time.Duration // Kafka aborts a transaction open this long (default 10s)
	SessionTimeout  time.Duration // a silent member is dropped after this (default 10s)
	// AtLeastOnce turns the transactions off: the output is produced as
	// it is emitted, and the input's offsets are committed after the
	// poll's output, outside any transaction. A process that dies in
	// between has its poll handled again and its output written twice.
	// It exists to measure what the transactions cost and to show that
	// the exactness checks catch the duplicates; do not run it for real.
	AtLeastOnce bool
}

// Transformer is one process of a stage: a member of a consumer group on
// an input topic that writes what it makes of each poll to other topics,
// exactly once — the poll's output and the input's offsets are committed
// in one Kafka transaction (franz-go's GroupTransactSession: read,
// process, write, commit offsets; a rebalance during the poll aborts the
// transaction and the partitions' new owner starts from the last commit).
// Consumers of the output must read with the read_committed isolation
// level; Transformers do.
type Transformer struct {
	cfg Config
	tc  TransformerConfig
	fn  TransformFunc

	running                   atomic.Bool
	in, out, committed, acked atomic.Uint64
	aborted                   atomic.Int64
}

// NewTransformer returns a stage process; Run starts it.
func NewTransformer(cfg Config, tc TransformerConfig, fn TransformFunc) (*Transformer, error) {
	if tc.Topic == "" || tc.Group == "" {
		return nil, errors.New("kafkabus: a transformer needs an input topic and a group")
	}
	if !tc.AtLeastOnce && tc.TransactionalID == "" {
		return nil, errors.New("kafkabus: a transformer needs a transactional ID")
	}
	if tc.MaxBatch <= 0 {
		tc.MaxBatch = 500
	}
	if tc.TxnTimeout <= 0 {
		tc.TxnTimeout = 10 * time.Second
	}
	if tc.SessionTimeout <= 0 {
		tc.SessionTimeout = 10 * time.Second
	}
	return &Transformer{cfg: cfg, tc: tc, fn: fn}, nil
}

// TransformerStats is what a Transformer has done.
type TransformerStats struct {
	In        uint64 `json:"in"`        // input records of committed polls
	Out       uint64 `json:"out"`       // records written by committed polls
	Committed uint64 `json:"committed"` // polls committed
	Aborted   int64  `json:"aborted"`   // transactions aborted by a rebalance
	// Acked counts output records the brokers acknowledged, of
	// committed polls or not: while it is above Out, a poll's output is
	// on the brokers and its commit still to come.
	Acked uint64 `json:"acked"`
}

// Stats returns what the Transformer has done so far.
func (t *Transformer) Stats() TransformerStats {
	return TransformerStats{In: t.in.Load(), Out: t.out.Load(), Committed: t.committed.Load(), Aborted: t.aborted.Load(), Acked: t.acked.Load()}
}

// Run handles polls until ctx ends (it then returns nil) or something
// fails: fn (its transaction is aborted), producing, committing.
func (t *Transformer) Run(ctx context.Context) error {
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("kafkabus: transformer already running")
	}
	defer t.running.Store(false)
	if t.tc.AtLeastOnce {
		return t.runAtLeastOnce(ctx)
	}
	opts, err := t.cfg.options(
		kgo.TransactionalID(t.tc.TransactionalID),
		kgo.TransactionTimeout(t.tc.TxnTimeout),
		kgo.ConsumerGroup(t.tc.Group),
		kgo.ConsumeTopics(t.tc.Topic),
		kgo.SessionTimeout(t.tc.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("kafkabus: transformer %s: %w", t.tc.Group, err)
	}
	defer sess.Close()
	for {
		// Polls end at least every idlePoll, so that an idle member
		// reaches the End below.
		pctx, pcancel := context.WithTimeout(ctx, idlePoll)
		fetches := sess.PollRecords(pctx, t.tc.MaxBatch)
		pcancel()
		if ctx.Err() != nil {
			return nil
		}
		if err := fetchError(fetches); err != nil {
			return fmt.Errorf("kafkabus: transformer %s: fetching %s: %w", t.tc.Group, t.tc.Topic, err)
		}
		in := fetches.Records()
		if len(in) == 0 {
			// The session remembers a rebalance until the next End, and
			// aborts that End's transaction: one that came while the
			// member had nothing to do (a process joining the group)
			// would abort the next poll's work for nothing. No
			// transaction is open here; this End only forgets it.
			if _, err := sess.End(ctx, kgo.TryAbort); err != nil && ctx.Err() == nil {
				return fmt.Errorf("kafkabus: transformer %s: %w", t.tc.Group, err)
			}
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("kafkabus: transformer %s: begin: %w", t.tc.Group, err)
		}
		var perr firstError
		var n uint64
		err := t.fn(ctx, in, func(r *kgo.Record) {
			n++
			sess.Produce(ctx, r, t.produced(&perr))
		})
		// End with its own deadline: a poll handled when ctx ended is
		// still committed (or aborted) cleanly.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err == nil {
			err = sess.Client().Flush(ectx)
		}
		if err == nil {
			err = perr.get()
		}
		if err != nil {
			_, aerr := sess.End(ectx, kgo.TryAbort)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kafkabus: transformer %s: %w", t.tc.Group, errors.Join(err, aerr))
		}
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		if err != nil {
			return fmt.Errorf("kafkabus: transformer %s: commit: %w", t.tc.Group, err)
		}
		if !committed {
			// A rebalance: the transaction was aborted, and whoever holds
			// the partitions now handles the poll again.
			t.aborted.Add(1)
			continue
		}
		t.in.Add(uint64(len(in)))
		t.out.Add(n)
		t.committed.Add(1)
	}
}

// runAtLeastOnce is Run without transactions (TransformerConfig.AtLeastOnce).
func (t *Transformer) runAtLeastOnce(ctx context.Context) error {
	cl, err := t.cfg.client(
		kgo.ConsumerGroup(t.tc.Group),
		kgo.ConsumeTopics(t.tc.Topic),
		kgo.SessionTimeout(t.tc.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	defer cl.CloseAllowingRebalance()
	for {
		fetches := cl.PollRecords(ctx, t.tc.MaxBatch)
		if ctx.Err() != nil {
			return nil
		}
		if err := fetchError(fetches); err != nil {
			return fmt.Errorf("kafkabus: transformer %s: fetching %s: %w", t.tc.Group, t.tc.Topic, err)
		}
		in := fetches.Records()
		var perr firstError
		var n uint64
		err := t.fn(ctx, in, func(r *kgo.Record) {
			n++
			cl.Produce(ctx, r, t.produced(&perr))
		})
		if err == nil {
			err = cl.Flush(ctx)
		}
		if err == nil {
			err = perr.get()
		}
		if err == nil && len(in) > 0 {
			err = cl.CommitRecords(ctx, in...)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kafkabus: transformer %s: %w", t.tc.Group, err)
		}
		t.in.Add(uint64(len(in)))
		t.out.Add(n)
		if len(in) > 0 {
			t.committed.Add(1)
		}
		cl.AllowRebalance()
	}
}

// produced is a produce callback: it counts an acknowledged record and
// keeps the first error.
func (t *Transformer) produced(perr *firstError) func(*kgo.Record, error) {
	return func(_ *kgo.Record, err error) {
		if err != nil {
			perr.set(err)
			return
		}
		t.acked.Add(1)
	}
}

// idlePoll bounds a Transformer's wait for records.
const idlePoll = time.Second

func fetchError(fetches kgo.Fetches) error {
	var ferr error
	fetches.EachError(func(_ string, _ int32, err error) {
		if ferr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !kerr.IsRetriable(err) {
			ferr = err
		}
	})
	return ferr
}

// firstError keeps the first error of the produce callbacks.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
