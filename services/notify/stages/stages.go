// Package stages is the notify pipeline deployed as separate processes,
// the shape of the mass-communication system it reproduces: the
// preference check, the build and the delivery each run as their own
// processes, connected by Kafka topics, each stage a consumer group
// scaled on its own. A send request enters as chunks of its recipients
// on the requests topic (Sender, in one transaction); the preference
// stage writes what each chunk's check decided to the checked topic; the
// build stage writes the messages, in delivery batches, to the built
// topic; the delivery stage posts each batch and writes its outcome to
// the outcomes topic.
//
// Exactly once from stage to stage: each stage process is a
// kafkabus.Transformer, which writes a poll's output and commits the
// poll's input offsets in one Kafka transaction, and reads with the
// read_committed isolation level. A process killed mid-poll leaves an
// open transaction that is aborted (at once when a process with the same
// instance name starts, else after the transaction timeout); its
// partitions' next owner reads the poll again from the last committed
// offsets, and only the output of the transaction that commits is read
// downstream.
//
// The delivery call itself is outside any transaction: a delivery
// process killed after posting a batch and before committing has the
// batch posted again by the next owner. Every message carries its
// idempotency key (request, user, channel), the same on every attempt,
// and the endpoint takes a key once: that is what keeps the second post
// from being a second notification. The outcomes topic, written in the
// transaction, holds each batch's outcome once.
//
// Stage events are Avro records in the schema registry's wire format
// (events.go), their schemas registered in logbook's registry under
// "<topic>-value".
package stages

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
)

// The stages.
const (
	Preference = "preference"
	Build      = "build"
	Deliver    = "deliver"
)

// Names lists the stages in pipeline order.
var Names = []string{Preference, Build, Deliver}

// Topics are the pipeline's topics, named after a prefix (the bus URL's
// topic): PREFIX.requests, .checked, .built and .outcomes.
type Topics struct {
	Prefix                             string
	Requests, Checked, Built, Outcomes string
}

// TopicsOf names the topics of prefix.
func TopicsOf(prefix string) Topics {
	return Topics{Prefix: prefix, Requests: prefix + ".requests", Checked: prefix + ".checked", Built: prefix + ".built", Outcomes: prefix + ".outcomes"}
}

// All lists the topics in pipeline order.
func (t Topics) All() []string { return []string{t.Requests, t.Checked, t.Built, t.Outcomes} }

// input is the topic a stage reads, output the one it writes.
func (t Topics) input(stage string) (in, out string) {
	switch stage {
	case Preference:
		return t.Requests, t.Checked
	case Build:
		return t.Checked, t.Built
	}
	return t.Built, t.Outcomes
}

// Group is the consumer group of a stage's processes.
func (t Topics) Group(stage string) string { return t.Prefix + "." + stage }

// EnsureTopics creates the topics with partitions each (the most
// processes a stage can use at once) if they are not there.
func EnsureTopics(ctx context.Context, bus kafkabus.Config, t Topics, partitions int32) error {
	for _, topic := range t.All() {
		if err := kafkabus.EnsureTopic(ctx, bus, topic, partitions, -1); err != nil {
			return err
		}
	}
	return nil
}

// Config configures a stage process.
type Config struct {
	Bus     kafkabus.Config
	Topics  Topics
	Schemas registry.Schemas // where the stage events' schemas are registered
	// Instance names this process among its stage's: its transactional
	// ID is the stage's group and Instance. A process restarted with the
	// same Instance aborts what its predecessor left open at once.
	Instance string
	// Users looks recipients up (preference and build).
	Users     notify.Users
	Policy    notify.Policy
	Templates notify.Templates
	// Deliverer posts the batches (deliver); Senders bounds the calls of
	// one poll in flight at once (default 8).
	Deliverer      *deliver.Deliverer
	Senders        int
	MaxBatch       int  // input records per poll and transaction (default 100)
	AtLeastOnce    bool // kafkabus.TransformerConfig.AtLeastOnce: for comparison only
	TxnTimeout     time.Duration
	SessionTimeout time.Duration // a silent process's partitions go to the others after this
}

// Run runs one process of stage until ctx ends.
func Run(ctx context.Context, stage string, cfg Config) error {
	t, err := New(ctx, stage, cfg)
	if err != nil {
		return err
	}
	return t.Run(ctx)
}

// New registers the stage events' schemas and returns one process of
// stage, to Run.
func New(ctx context.Context, stage string, cfg Config) (*kafkabus.Transformer, error) {
	if !slices.Contains(Names, stage) {
		return nil, fmt.Errorf("stages: unknown stage %q: want preference, build or deliver", stage)
	}
	if cfg.Instance == "" {
		return nil, errors.New("stages: an instance name is needed")
	}
	switch {
	case stage != Deliver && cfg.Users == nil:
		return nil, fmt.Errorf("stages: the %s stage needs the users", stage)
	case stage == Deliver && cfg.Deliverer == nil:
		return nil, errors.New("stages: the deliver stage needs a deliverer")
	case stage == Build && cfg.Templates == nil:
		return nil, errors.New("stages: the build stage needs templates")
	}
	codecs, err := RegisterCodecs(ctx, cfg.Schemas, cfg.Topics)
	if err != nil {
		return nil, err
	}
	in, out := cfg.Topics.input(stage)
	s := &stageProc{cfg: cfg, codecs: codecs, out: out}
	fn := map[string]kafkabus.TransformFunc{Preference: s.preference, Build: s.build, Deliver: s.deliver}[stage]
	maxBatch := cfg.MaxBatch
	if maxBatch <= 0 {
		maxBatch = 100
	}
	group := cfg.Topics.Group(stage)
	return kafkabus.NewTransformer(cfg.Bus, kafkabus.TransformerConfig{
		Topic: in, Group: group, TransactionalID: group + "." + cfg.Instance,
		MaxBatch: maxBatch, TxnTimeout: cfg.TxnTimeout, SessionTimeout: cfg.SessionTimeout, AtLeastOnce: cfg.AtLeastOnce,
	}, fn)
}

type stageProc struct {
	cfg    Config
	codecs *Codecs
	out    string
}

// record is an output record keyed by request and chunk: a chunk's
// records stay in one partition downstream.
func (s *stageProc) record(request string, chunk int32, value []byte) *kgo.Record {
	return &kgo.Record{Topic: s.out, Key: []byte(request + "/" + strconv.Itoa(int(chunk))), Value: value}
}

func channelsOf(cs []notify.Channel) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// preference checks each chunk's recipients.
func (s *stageProc) preference(ctx context.Context, in []*kgo.Record, emit func(*kgo.Record)) error {
	for _, r := range in {
		c, err := s.codecs.Chunk.Decode(r.Value)
		if err != nil {
			return fmt.Errorf("preference: decode a chunk at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		users, err := s.cfg.Users.Users(ctx, c.UserIDs)
		if err != nil {
			return fmt.Errorf("preference: look up users: %w", err)
		}
		out := Checked{Request: c.Request, Type: c.Type, ClubID: c.ClubID, Sender: c.Sender, Timestamp: c.Timestamp, Chunk: c.Chunk,
			Recipients: []Recipient{}, Refused: map[string]int64{}}
		for _, id := range c.UserIDs {
			d := s.cfg.Policy.Check(users[id], c.Type)
			if d.Refused != "" {
				out.Refused[string(d.Refused)]++
				continue
			}
			out.Recipients = append(out.Recipients, Recipient{UserID: id, Channels: channelsOf(d.Channels)})
		}
		v, err := s.codecs.Checked.Encode(nil, out)
		if err != nil {
			return err
		}
		emit(s.record(c.Request, c.Chunk, v))
	}
	return nil
}

// build makes each checked chunk's messages, in batches per channel.
func (s *stageProc) build(ctx context.Context, in []*kgo.Record, emit func(*kgo.Record)) error {
	for _, r := range in {
		c, err := s.codecs.Checked.Decode(r.Value)
		if err != nil {
			return fmt.Errorf("build: decode a checked chunk at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if len(c.Recipients) == 0 {
			continue
		}
		ids := make([]int64, len(c.Recipients))
		for i, rc := range c.Recipients {
			ids[i] = rc.UserID
		}
		users, err := s.cfg.Users.Users(ctx, ids)
		if err != nil {
			return fmt.Errorf("build: look up users: %w", err)
		}
		req := &notify.Request{ID: c.Request, Type: c.Type, ClubID: c.ClubID, Sender: c.Sender, Timestamp: time.UnixMilli(c.Timestamp)}
		byChannel := map[notify.Channel][]Message{}
		for _, rc := range c.Recipients {
			u := users[rc.UserID]
			if u == nil {
				continue // removed since the check: nobody to send to
			}
			d := notify.Decision{}
			for _, ch := range rc.Channels {
				d.Channels = append(d.Channels, notify.Channel(ch))
			}
			msgs, err := s.cfg.Templates.Build(req, u, d)
			if err != nil {
				return fmt.Errorf("build: %w", err)
			}
			for _, m := range msgs {
				if len(m.To) == 0 || m.To[0] == "" {
					continue // the address was removed since the check
				}
				byChannel[m.Channel] = append(byChannel[m.Channel], Message{Key: m.Key, UserID: m.UserID, Channel: string(m.Channel), To: m.To, Title: m.Title, Body: m.Body})
			}
		}
		for _, ch := range notify.Channels {
			msgs := byChannel[ch]
			for i := 0; len(msgs) > 0; i++ {
				n := min(notify.MaxBatch, len(msgs))
				b := Batch{Request: c.Request, Type: c.Type, ClubID: c.ClubID, Sender: c.Sender, Timestamp: c.Timestamp, Chunk: c.Chunk,
					Channel: string(ch), Index: int32(i), Messages: msgs[:n]}
				msgs = msgs[n:]
				v, err := s.codecs.Batch.Encode(nil, b)
				if err != nil {
					return err
				}
				emit(s.record(c.Request, c.Chunk, v))
			}
		}
	}
	return nil
}

// deliver posts each batch (at most Senders at once) and writes its
// outcome, in input order.
func (s *stageProc) deliver(ctx context.Context, in []*kgo.Record, emit func(*kgo.Record)) error {
	batches := make([]Batch, len(in))
	for i, r := range in {
		b, err := s.codecs.Batch.Decode(r.Value)
		if err != nil {
			return fmt.Errorf("deliver: decode a batch at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		batches[i] = b
	}
	senders := s.cfg.Senders
	if senders <= 0 {
		senders = 8
	}
	outcomes := make([]Outcome, len(batches))
	errs := make([]error, len(batches))
	sem := make(chan struct{}, senders)
	var wg sync.WaitGroup
	for i, b := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[i], errs[i] = s.post(ctx, b)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, o := range outcomes {
		v, err := s.codecs.Outcome.Encode(nil, o)
		if err != nil {
			return err
		}
		emit(s.record(o.Request, o.Chunk, v))
	}
	return nil
}

// post delivers one batch. A batch that failed for good is an outcome
// (its recipients kept to replay), not an error; the context's end is.
func (s *stageProc) post(ctx context.Context, b Batch) (Outcome, error) {
	o := Outcome{Request: b.Request, Type: b.Type, ClubID: b.ClubID, Sender: b.Sender, Timestamp: b.Timestamp,
		Chunk: b.Chunk, Channel: b.Channel, Index: b.Index, UserIDs: []int64{}}
	msgs := make([]notify.Message, len(b.Messages))
	for i, m := range b.Messages {
		msgs[i] = notify.Message{Key: m.Key, UserID: m.UserID, Channel: notify.Channel(m.Channel), To: m.To, Title: m.Title, Body: m.Body}
	}
	n, err := s.cfg.Deliverer.Deliver(ctx, msgs)
	o.Retries = int64(n)
	switch {
	case err == nil:
		o.Delivered = int64(len(msgs))
	case ctx.Err() != nil:
		return o, ctx.Err()
	default:
		o.Failed = int64(len(msgs))
		o.Reason = err.Error()
		if fe, ok := errors.AsType[*deliver.FailedError](err); ok {
			o.Reason = deliver.RedactReason(fe.Reason)
		}
		for _, m := range msgs {
			o.UserIDs = append(o.UserIDs, m.UserID)
		}
	}
	return o, nil
}

// Sender writes send requests to the requests topic: each request's
// chunks in one transaction, so a request is taken whole or not at all.
type Sender struct {
	cl     *kgo.Client
	codecs *Codecs
	topics Topics
	mu     sync.Mutex
}

// NewSender returns a Sender with transactional ID PREFIX.send.instance.
func NewSender(ctx context.Context, bus kafkabus.Config, schemas registry.Schemas, t Topics, instance string) (*Sender, error) {
	codecs, err := RegisterCodecs(ctx, schemas, t)
	if err != nil {
		return nil, err
	}
	cl, err := kafkabus.NewClient(bus, kgo.TransactionalID(t.Prefix+".send."+instance), kgo.DefaultProduceTopic(t.Requests))
	if err != nil {
		return nil, err
	}
	return &Sender{cl: cl, codecs: codecs, topics: t}, nil
}

// Close closes the Sender's client.
func (s *Sender) Close() { s.cl.Close() }

// Send writes r's distinct recipients in chunks of chunk (default 1000)
// and returns how many chunks; a recipient listed twice is sent to once.
func (s *Sender) Send(ctx context.Context, r *notify.Request, chunk int) (int, error) {
	if chunk <= 0 {
		chunk = 1000
	}
	seen := make(map[int64]struct{}, len(r.ToUsers))
	ids := make([]int64, 0, len(r.ToUsers))
	for _, id := range r.ToUsers {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	chunks := (len(ids) + chunk - 1) / chunk
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cl.BeginTransaction(); err != nil {
		return 0, err
	}
	var perr error
	var pmu sync.Mutex
	for i := range chunks {
		c := Chunk{Request: r.ID, Type: r.Type, ClubID: r.ClubID, Sender: r.Sender, Timestamp: r.Timestamp.UnixMilli(),
			Chunk: int32(i), Chunks: int32(chunks), UserIDs: ids[i*chunk : min((i+1)*chunk, len(ids))]}
		v, err := s.codecs.Chunk.Encode(nil, c)
		if err != nil {
			_ = s.cl.AbortBufferedRecords(ctx)
			_ = s.cl.EndTransaction(ctx, kgo.TryAbort)
			return 0, err
		}
		s.cl.Produce(ctx, &kgo.Record{Key: []byte(r.ID + "/" + strconv.Itoa(i)), Value: v}, func(_ *kgo.Record, err error) {
			pmu.Lock()
			if perr == nil {
				perr = err
			}
			pmu.Unlock()
		})
	}
	err := s.cl.Flush(ctx)
	if err == nil {
		err = perr
	}
	if err != nil {
		_ = s.cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return 0, fmt.Errorf("stages: send %s: %w", r.ID, err)
	}
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, fmt.Errorf("stages: send %s: commit: %w", r.ID, err)
	}
	return chunks, nil
}

// WaitStable waits until each stage's group is stable with procs members:
// work sent before may be caught by the rebalances of processes still
// joining, which abort their transactions (delivery then posts batches
// again, which the idempotency keys drop, but which cost time).
func WaitStable(ctx context.Context, bus kafkabus.Config, t Topics, procs int) error {
	cl, err := kafkabus.NewClient(bus)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups := make([]string, len(Names))
	for i, s := range Names {
		groups[i] = t.Group(s)
	}
	// Stable, with the same members and assignments, three times in a
	// row: a cooperative rebalance goes through two rounds, and the
	// group is Stable for a moment between them.
	var last string
	settled := 0
	for {
		gs, err := adm.DescribeGroups(ctx, groups...)
		stable := err == nil
		var seen strings.Builder
		for _, g := range groups {
			d, ok := gs[g]
			if !ok || d.Err != nil || d.State != "Stable" || len(d.Members) != procs {
				stable = false
				continue
			}
			for _, m := range d.Members {
				fmt.Fprintf(&seen, "%s=", m.MemberID)
				if c, ok := m.Assigned.AsConsumer(); ok {
					for _, tp := range c.Topics {
						fmt.Fprintf(&seen, "%s%v", tp.Topic, tp.Partitions)
					}
				}
				seen.WriteByte(';')
			}
		}
		if stable && seen.String() == last {
			settled++
		} else {
			settled = 0
		}
		last = seen.String()
		if stable && settled >= 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stages: the groups did not settle with %d processes each: %w", procs, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}
