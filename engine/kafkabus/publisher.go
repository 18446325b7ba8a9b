package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
)

// ErrFenced is returned by Publisher.Run when another publisher claimed the
// same transactional ID: this one is the zombie and must stop.
var ErrFenced = errors.New("kafkabus: publisher fenced by another publisher with the same transactional id")

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	Config
	// Topic receives the events.
	Topic string
	// TransactionalID identifies the publisher of the topic to Kafka. Every
	// node that may publish the topic uses the same one: the newest to
	// start fences the others.
	TransactionalID string
	// Partitions and ReplicationFactor create the topic when it does not
	// exist (defaults 12 and the broker's default).
	Partitions        int32
	ReplicationFactor int16
	// MaxTxnEvents bounds the events of one Kafka transaction (default
	// 2000).
	MaxTxnEvents int
	// TxnTimeout is the transaction timeout Kafka enforces (default 10s):
	// how long read_committed consumers may be held up by the open
	// transaction of a publisher that died without a successor.
	TxnTimeout time.Duration
	// MaxBackoff caps the wait between attempts after a failure (default
	// 5s).
	MaxBackoff time.Duration
	// Logger receives the failures Run retries (default slog.Default()).
	Logger *slog.Logger
	// Progress, if set, keeps a lower bound of what Kafka holds outside
	// Kafka. Retention can empty every partition of a quiet topic; what
	// Kafka holds then says nothing, and without a bound the publisher
	// would publish the whole log again.
	Progress Progress
	// Schemas, if set, makes the values Avro in the schema registry's wire
	// format (EventSchema, registered under the subject "<topic>-value"),
	// so that stock consumers with a Confluent deserializer read the
	// topic. Without it values are in logbook's own format. Readers here
	// read both.
	Schemas registry.Schemas
}

// Progress stores the last position a publisher knows Kafka committed. It
// is saved after Kafka's commit, so it never runs ahead of Kafka.
type Progress interface {
	Load(ctx context.Context) (uint64, error)
	Save(ctx context.Context, position uint64) error
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.Partitions <= 0 {
		c.Partitions = 12
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.MaxTxnEvents <= 0 {
		c.MaxTxnEvents = 2000
	}
	if c.TxnTimeout <= 0 {
		c.TxnTimeout = 10 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Publisher copies the store's log to a Kafka topic, exactly once and in
// order (see the package documentation).
type Publisher struct {
	store eventstore.Store
	cfg   PublisherConfig

	running   atomic.Bool
	published atomic.Uint64 // events in transactions this Publisher committed
	last      atomic.Uint64 // last position known committed in Kafka
	lastErr   atomic.Pointer[failure]

	// beforeCommit, if set (tests), runs after a transaction's records are
	// flushed and before it is committed.
	beforeCommit func(first, last uint64)
}

// NewPublisher returns a Publisher of store's log; Run starts it.
func NewPublisher(store eventstore.Store, cfg PublisherConfig) *Publisher {
	return &Publisher{store: store, cfg: cfg.withDefaults()}
}

// Published returns how many events this Publisher has committed to Kafka.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// LastPosition returns the last position known to be committed in Kafka:
// found at start, then raised by every commit. 0 until Run has looked.
func (p *Publisher) LastPosition() uint64 { return p.last.Load() }

// Lag returns how many committed events of the store Kafka does not hold
// yet, as far as this Publisher knows.
func (p *Publisher) Lag(ctx context.Context) (uint64, error) {
	head, err := p.store.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("kafkabus: publisher lag: %w", err)
	}
	last := p.last.Load()
	if head <= last {
		return 0, nil
	}
	return head - last, nil
}

// failure is an error and when it happened.
type failure struct {
	err error
	at  time.Time
}

// LastError returns when the last publishing session failed (the
// publisher then resumes after a backoff) and with what; a nil error if
// none failed.
func (p *Publisher) LastError() (time.Time, error) {
	if f := p.lastErr.Load(); f != nil {
		return f.at, f.err
	}
	return time.Time{}, nil
}

// Run publishes until ctx ends (then it returns nil), the store is closed,
// or another publisher fences this one (ErrFenced). Other failures — the
// broker unreachable, a transaction that could not commit — end the
// current session; the next one finds again what Kafka holds and resumes
// after it, after a backoff.
func (p *Publisher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("kafkabus: publisher already running")
	}
	defer p.running.Store(false)
	if p.cfg.Topic == "" || p.cfg.TransactionalID == "" {
		return errors.New("kafkabus: publisher needs a topic and a transactional id")
	}
	backoff := 100 * time.Millisecond
	for {
		published := p.published.Load()
		err := p.session(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrFenced), errors.Is(err, eventstore.ErrClosed):
			return err
		}
		if p.published.Load() > published {
			backoff = 100 * time.Millisecond
		}
		p.lastErr.Store(&failure{err: err, at: time.Now()})
		p.cfg.Logger.Warn("kafkabus: publisher session failed; resuming", "topic", p.cfg.Topic, "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// session claims the transactional ID, finds what Kafka holds and
// publishes from there until something fails.
func (p *Publisher) session(ctx context.Context) error {
	if err := EnsureTopic(ctx, p.cfg.Config, p.cfg.Topic, p.cfg.Partitions, p.cfg.ReplicationFactor); err != nil {
		return err
	}
	schemaID := 0 // logbook's format
	if p.cfg.Schemas != nil {
		var err error
		if schemaID, err = p.cfg.Schemas.Register(ctx, p.cfg.Topic+"-value", EventSchema); err != nil {
			return fmt.Errorf("kafkabus: register the schema of %s: %w", p.cfg.Topic, err)
		}
	}
	cl, err := p.cfg.client(
		kgo.TransactionalID(p.cfg.TransactionalID),
		kgo.TransactionTimeout(p.cfg.TxnTimeout),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.DefaultProduceTopic(p.cfg.Topic),
		// Since KIP-890 a produce sent right after a commit may be refused
		// with CONCURRENT_TRANSACTIONS until the broker has written the
		// commit's markers; the produce retry backoff (250ms and up by
		// default) would then bound us to a few transactions a second.
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(5*time.Millisecond<<min(tries, 8), time.Second)
		}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Claiming the ID fences older publishers and settles the transaction
	// one of them may have left open; only after that is what Kafka holds
	// committed final, and safe to resume after.
	started := time.Now()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fenced(fmt.Errorf("kafkabus: claim transactional id %q: %w", p.cfg.TransactionalID, err))
	}
	last, err := LastPublished(ctx, p.cfg.Config, p.cfg.Topic)
	if err != nil {
		return err
	}
	if p.cfg.Progress != nil {
		saved, err := p.cfg.Progress.Load(ctx)
		if err != nil {
			return fmt.Errorf("kafkabus: load progress: %w", err)
		}
		if saved > last {
			p.cfg.Logger.Warn("kafkabus: the topic holds less than was published (retention); resuming after the saved progress",
				"topic", p.cfg.Topic, "kafka", last, "saved", saved)
			last = saved
		}
	}
	p.last.Store(last)
	p.cfg.Logger.Info("kafkabus: publisher resuming", "topic", p.cfg.Topic, "after", last, "took", time.Since(started))
	sub, err := p.store.Subscribe(ctx, eventstore.All(), last+1)
	if err != nil {
		return fmt.Errorf("kafkabus: subscribe from %d: %w", last+1, err)
	}
	defer sub.Close()
	var carry []eventstore.Event // read but not yet published
	for {
		if len(carry) == 0 {
			if carry, err = sub.Next(ctx); err != nil {
				return fmt.Errorf("kafkabus: reading the log after %d: %w", p.last.Load(), err)
			}
		}
		if carry, err = p.transaction(ctx, cl, sub, carry, schemaID); err != nil {
			return err
		}
	}
}

// tailWait bounds the wait for events the head says are there: a removed
// tail of the log never comes.
const tailWait = 100 * time.Millisecond

// transaction publishes evs, and whatever more the log already holds, up
// to MaxTxnEvents, in one Kafka transaction. It returns the events it read
// but left for the next one. Values are in Avro under schemaID, or in
// logbook's format if it is 0.
func (p *Publisher) transaction(ctx context.Context, cl *kgo.Client, sub eventstore.Subscription, evs []eventstore.Event, schemaID int) (rest []eventstore.Event, err error) {
	if err := cl.BeginTransaction(); err != nil {
		return nil, fenced(fmt.Errorf("kafkabus: begin transaction: %w", err))
	}
	defer func() {
		if err == nil {
			return
		}
		// Abort now rather than leave the transaction to its timeout:
		// read_committed consumers wait behind an open one. A clean stop
		// needs it most, so the context here outlives ctx.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = cl.AbortBufferedRecords(actx)
		_ = cl.EndTransaction(actx, kgo.TryAbort)
	}()

	first := p.last.Load() + 1
	next := first // the lowest position the next event may have
	produced := 0 // events produced in this transaction
	var (
		mu      sync.Mutex
		failure error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if failure == nil {
				failure = err
			}
			mu.Unlock()
		}
	}
	// produce sends events until the transaction is full and returns the
	// rest.
	produce := func(evs []eventstore.Event) ([]eventstore.Event, error) {
		for i, ev := range evs {
			if produced >= p.cfg.MaxTxnEvents {
				return evs[i:], nil
			}
			// Positions only grow; a hole is an event removed from the
			// store (eventstore.Deleter), which Kafka never gets.
			if ev.Position < next {
				return nil, fmt.Errorf("kafkabus: the log gave position %d where %d or later was next", ev.Position, next)
			}
			rec, err := encodeRecord(p.cfg.Topic, ev, schemaID)
			if err != nil {
				return nil, err
			}
			cl.Produce(ctx, rec, promise)
			next = ev.Position + 1
			produced++
		}
		return nil, nil
	}
	if rest, err = produce(evs); err != nil {
		return nil, err
	}
	for len(rest) == 0 && produced < p.cfg.MaxTxnEvents {
		head, err := p.store.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafkabus: head: %w", err)
		}
		if head < next {
			break // nothing more without waiting: commit what we have
		}
		// The head is at or past next, so more is there — unless the
		// events up to the head were removed (eventstore.Deleter): then
		// the wait is cut short and what we have is committed.
		nctx, cancel := context.WithTimeout(ctx, tailWait)
		more, err := sub.Next(nctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("kafkabus: reading the log after %d: %w", next-1, err)
		}
		if rest, err = produce(more); err != nil {
			return nil, err
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("kafkabus: flush: %w", err)
	}
	mu.Lock()
	err = failure
	mu.Unlock()
	if err != nil {
		return nil, fenced(fmt.Errorf("kafkabus: produce positions %d-%d: %w", first, next-1, err))
	}
	if p.beforeCommit != nil {
		p.beforeCommit(first, next-1)
	}
	// No retry here: if the outcome of the commit is unknown, only a new
	// session, which claims the ID again and looks at what Kafka holds,
	// knows where to resume. Everything is produced by now, so a stop
	// (ctx ending) lets the commit finish rather than leave its outcome
	// unknown to us.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.TxnTimeout)
	defer cancel()
	if err := cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return nil, fenced(fmt.Errorf("kafkabus: commit positions %d-%d: %w", first, next-1, err))
	}
	p.last.Store(next - 1)
	p.published.Add(uint64(produced))
	p.saveProgress(ctx, next-1)
	return rest, nil
}

// saveProgress records how far Kafka has committed. A save lost to a
// crash leaves the bound one transaction behind; that matters only if
// retention then empties the topic before the next publish, and costs
// that transaction published twice.
func (p *Publisher) saveProgress(ctx context.Context, pos uint64) {
	if p.cfg.Progress == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.cfg.Progress.Save(sctx, pos); err != nil {
		p.cfg.Logger.Warn("kafkabus: save progress", "topic", p.cfg.Topic, "err", err)
	}
}

// fenced marks err as ErrFenced if Kafka said another producer took over
// the transactional ID.
func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// LastPublished returns the largest position among the committed events
// in topic, 0 if it holds none. Because a Publisher's transactions commit
// contiguous ranges in order, every position up to it is there too (unless
// retention removed it). It reads each partition backwards from its last
// stable offset in growing steps until it meets a committed data record,
// skipping commit markers and aborted records.
func LastPublished(ctx context.Context, cfg Config, topic string) (uint64, error) {
	cl, err := cfg.client()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafkabus: start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafkabus: stable offsets of %s: %w", topic, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		last  uint64
		first error
	)
	ends.Each(func(end kadm.ListedOffset) {
		start, _ := starts.Lookup(topic, end.Partition)
		if end.Offset <= start.Offset {
			return // empty
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pos, err := lastInPartition(ctx, cfg, topic, end.Partition, start.Offset, end.Offset)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			last = max(last, pos)
		}()
	})
	wg.Wait()
	return last, first
}

// lastInPartition finds the position of the last committed data record in
// [start, end) of a partition, 0 if there is none.
func lastInPartition(ctx context.Context, cfg Config, topic string, partition int32, start, end int64) (uint64, error) {
	step := int64(16)
	for hi := end; hi > start; {
		lo := max(start, hi-step)
		pos, err := lastInWindow(ctx, cfg, topic, partition, lo, hi)
		if err != nil || pos > 0 {
			return pos, err
		}
		hi = lo
		step *= 4
	}
	return 0, nil
}

// lastInWindow reads [lo, hi) of a partition. The reader keeps control
// records, so it is done once it sees any record at hi-1 or beyond: every
// transaction ends in a marker, so the last offset below the stable offset
// always holds a record it receives, and offsets past hi were read before.
// A fresh client per window keeps records from an earlier seek out.
func lastInWindow(ctx context.Context, cfg Config, topic string, partition int32, lo, hi int64) (uint64, error) {
	cl, err := cfg.client(
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(lo)}}),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last uint64
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("kafkabus: reading %s/%d offsets %d-%d: %w", topic, partition, lo, hi, err)
		}
		var err error
		fetches.EachError(func(_ string, _ int32, e error) {
			if !kerr.IsRetriable(e) && err == nil {
				err = e
			}
		})
		if err != nil {
			return 0, fmt.Errorf("kafkabus: reading %s/%d: %w", topic, partition, err)
		}
		done := false
		for _, r := range fetches.Records() {
			if r.Offset >= hi-1 {
				done = true
			}
			if r.Offset >= hi || r.Attrs.IsControl() {
				continue
			}
			ev, err := decodeValue(r.Value)
			if err != nil {
				return 0, fmt.Errorf("%w: %s/%d offset %d: %v", errCorrupt, topic, partition, r.Offset, err)
			}
			last = ev.Position
		}
		if done {
			return last, nil
		}
	}
}
