package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// Users is the users' data the service reads: the lookup of the
// preference check and the build, and the clubs (userscdc.View).
type Users interface {
	notify.Users
	Members(ctx context.Context, club int64, max int) ([]int64, error)
	Clubs(ctx context.Context) ([]userscdc.Club, error)
}

// Deliverer delivers one batch of one channel (deliver.Deliverer): the
// retries it took, and a *deliver.FailedError when it failed for good.
type Deliverer interface {
	Deliver(ctx context.Context, batch []notify.Message) (retries int, err error)
}

// Config configures a Service; Users and Deliverer are required.
type Config struct {
	// Follow is where the state and the metrics follow the log from
	// (default the service's store): a kafkabus.ReplicaStore follows it on Kafka. The
	// state and the metrics then read every event of the log, not only
	// the service's tag, as a replica store serves only whole-log
	// subscriptions from Kafka.
	Follow    eventstore.Store
	Users     Users
	Deliverer Deliverer
	// Policy and Templates default to DefaultPolicy and DefaultTemplates.
	Policy    notify.Policy
	Templates notify.Templates
	// StateDir holds the metrics' windows (StateDir/windows).
	StateDir string
	// ChunkSize is the recipients per chunk event and per pipeline step
	// (default 10,000); MaxRecipients bounds a request (default
	// 1,000,000).
	ChunkSize     int
	MaxRecipients int
	// Parallel is how many chunks the pipeline works on at once (default
	// 4), Senders how many batches each keeps in flight (default 8).
	Parallel int
	Senders  int
	// MetricsGrace is how long after its end a metrics window still
	// takes outcomes (default 1 h): an outcome later than that is
	// counted as late, not in the window.
	MetricsGrace time.Duration
	// MaxAge and MaxSkew bound a send's timestamp, the event time of its
	// metrics: it must lie in [now - MaxAge, now + MaxSkew] (defaults
	// 24 h and 1 min). A timestamp far ahead (a wrong clock, or
	// milliseconds where seconds were meant) would otherwise close every
	// metrics window before the real outcomes arrive; one far behind
	// would only be counted late. The metrics' window engine sets aside
	// events more than MaxSkew ahead of the clock as well.
	MaxAge  time.Duration
	MaxSkew time.Duration
	// Exclusive, if set, runs the pipeline only while it returns the
	// lock of the processes sharing the store (pgstore.Store.Exclusive),
	// so that of several servers on one store one delivers at a time;
	// the others accept requests and answer queries.
	Exclusive func(ctx context.Context, run func(context.Context) error) error
	// Keyring, if set, is the users' keys the users view seals their
	// personal data under (userscdc.ViewOptions.Keyring): Forget
	// destroys a user's.
	Keyring    *shred.Keyring
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Errors of the service, wrapped with details.
var (
	ErrInvalid      = errors.New("notify: invalid request")                                                                                // 400
	ErrUnacceptable = errors.New("notify: request cannot be sent")                                                                         // 422: unknown type, too many recipients, empty club
	ErrKeyReused    = errors.New("notify: idempotency key reused")                                                                         // 422: same key, another request
	ErrNotFound     = errors.New("notify: not found")                                                                                      // 404
	ErrClosed       = errors.New("notify: service closed")                                                                                 // 503
	ErrTooLarge     = errors.New("notify: replay names too many letters")                                                                  // 413
	ErrNoKeyring    = errors.New("notify: users' data is kept without a keyring (no master key was given), so a user cannot be forgotten") // 501
)

// Forget erases a user's personal data at their request: their key in
// the keyring is destroyed, so that the users view can no longer read
// their name, e-mail address or device tokens (nor can anything that
// copied the view's files), and an audit event (shred.AuditStream)
// records that a user was forgotten, when and by whom, naming the user
// only by the keyring's keyed hash. From then on the user is refused
// "forgotten", whatever the users' database still holds of them.
func (s *Service) Forget(ctx context.Context, userID int64, by string) (shred.Forgotten, error) {
	if s.cfg.Keyring == nil {
		return shred.Forgotten{}, ErrNoKeyring
	}
	return s.cfg.Keyring.Forget(ctx, userscdc.Subject(userID), by)
}

// MaxReplay bounds the dead letters one replay names.
const MaxReplay = 2000

// Service is the notify service.
type Service struct {
	store eventstore.Store
	cfg   Config
	log   *slog.Logger
	view  *projection.Memory[state]
	state *projection.Runner
	agg   *window.Aggregation
	aggR  *projection.Runner

	changed chan struct{} // a buffered signal: the state moved
	counted *prometheus.CounterVec
	flight  prometheus.Gauge
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errMu   sync.Mutex
	err     error
	failed  chan struct{} // closed with err set
}

// New opens the metrics' windows, starts following the log in store
// and starts the pipeline. Close stops it.
func New(ctx context.Context, store eventstore.Store, cfg Config) (*Service, error) {
	if store == nil || cfg.Users == nil || cfg.Deliverer == nil {
		return nil, errors.New("notify: a service needs a store, users and a deliverer")
	}
	if cfg.Policy.Mandatory == nil {
		cfg.Policy = DefaultPolicy
	}
	if cfg.Templates == nil {
		cfg.Templates = DefaultTemplates
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 10_000
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = 1_000_000
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	if cfg.Senders <= 0 {
		cfg.Senders = 8
	}
	if cfg.MetricsGrace <= 0 {
		cfg.MetricsGrace = time.Hour
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StateDir == "" {
		return nil, errors.New("notify: no state directory")
	}
	agg, err := window.Open(filepath.Join(cfg.StateDir, "windows"), MetricsDefinition(cfg.MetricsGrace), window.Options{Registerer: cfg.Registerer, Logger: cfg.Logger, MaxSkew: cfg.MaxSkew})
	if err != nil {
		return nil, err
	}
	s := &Service{store: store, cfg: cfg, log: cfg.Logger, agg: agg, changed: make(chan struct{}, 1), failed: make(chan struct{})}
	s.counted, err = metrics.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logbook_notify_outcomes_total",
		Help: "The counts of the outcomes this process appended (pipeline steps done): requested, refused, built, delivered, failed, dead_lettered, retries.",
	}, []string{"count"}))
	if err == nil {
		s.flight, err = metrics.Register(cfg.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "logbook_notify_steps_in_flight",
			Help: "Pipeline steps (chunks of requests, replays) being worked on.",
		}))
	}
	if err != nil {
		_ = agg.Close()
		return nil, err
	}
	s.view = projection.NewMemory(newState(), func(st *state, ev eventstore.Event) error {
		if err := st.apply(ev); err != nil {
			return err
		}
		select {
		case s.changed <- struct{}{}:
		default:
		}
		return nil
	})
	follow, filter := store, eventstore.Tagged(Tag)
	if cfg.Follow != nil {
		follow, filter = cfg.Follow, eventstore.All()
	}
	s.state = projection.NewRunner(follow, s.view, projection.Options{Name: "notify", Filter: filter, Registerer: cfg.Registerer, Logger: cfg.Logger})
	s.aggR = projection.NewRunner(follow, agg, projection.Options{Name: "notify-windows", Filter: filter, Registerer: cfg.Registerer, Logger: cfg.Logger})
	ctx, s.cancel = context.WithCancel(ctx)
	for _, r := range []*projection.Runner{s.state, s.aggR} {
		s.wg.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				s.fail(err)
			}
		})
	}
	s.wg.Go(func() {
		if cfg.Exclusive == nil {
			s.schedule(ctx)
			return
		}
		err := cfg.Exclusive(ctx, func(ctx context.Context) error {
			s.log.Info("notify pipeline running: this process holds the pipeline's lock")
			s.schedule(ctx)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			s.fail(err)
		}
	})
	return s, nil
}

func (s *Service) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.failed)
		s.log.Error("notify service stopped", "err", err)
	}
}

// Err is why the service stopped working, nil while it works: its
// state or metrics stopped following the log, or the pipeline stopped
// (a step failed again and again, or its state stopped). /healthz
// reports it.
func (s *Service) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Close stops the pipeline (work in flight is dropped and done again
// at the next start) and closes the windows.
func (s *Service) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.agg.Close()
}

// Aggregation is the metrics' windowed aggregation (for
// window.NewHandler and the PostgreSQL sink).
func (s *Service) Aggregation() *window.Aggregation { return s.agg }

// WaitCaughtUp waits until the state and the metrics reflect the log up
// to its head now.
func (s *Service) WaitCaughtUp(ctx context.Context) error {
	if err := s.state.WaitCaughtUp(ctx); err != nil {
		return err
	}
	return s.aggR.WaitCaughtUp(ctx)
}

// Types lists the notification types a request may have.
func (s *Service) Types() []TypeInfo { return typeInfos(s.cfg.Templates, s.cfg.Policy) }

// Clubs lists the clubs of the users' data with their member counts.
func (s *Service) Clubs(ctx context.Context) ([]userscdc.Club, error) { return s.cfg.Users.Clubs(ctx) }

// SendInput is a send request as a client makes it.
type SendInput struct {
	Type      string     `json:"type"`
	ClubID    int64      `json:"club_id"`
	Sender    string     `json:"sender"`
	Timestamp *time.Time `json:"timestamp,omitempty"` // nil: now
	ToUsers   []int64    `json:"to_users,omitempty"`
	ToClub    bool       `json:"to_club,omitempty"`
}

// Accepted is the answer to a send.
type Accepted struct {
	ID         string `json:"id"`
	Recipients int    `json:"recipients"` // distinct
	Duplicates int    `json:"duplicates"` // listed more than once
	Position   uint64 `json:"position"`   // the request's last event: wait for it to read its state
	Duplicate  bool   `json:"-"`          // a retry of an accepted request
}

// MaxKey bounds an idempotency key.
const MaxKey = 128

func (in *SendInput) hash() string {
	h := sha256.New()
	ts := ""
	if in.Timestamp != nil {
		ts = in.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(h, "%q %d %q %q %v %d\n", in.Type, in.ClubID, in.Sender, ts, in.ToClub, len(in.ToUsers))
	b := make([]byte, 0, 8*len(in.ToUsers))
	for _, id := range in.ToUsers {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Event times must fit in Unix nanoseconds (window.MinTime and
// window.MaxTime): years 1678 to 2262.

// checkTimestamp refuses a send timestamp outside [now - MaxAge,
// now + MaxSkew] or outside what Unix nanoseconds hold.
func (s *Service) checkTimestamp(ts, now time.Time) error {
	if ts.Before(window.MinTime) || ts.After(window.MaxTime) {
		return fmt.Errorf("%w: timestamp %s: outside the years 1678 to 2262 that event times can hold", ErrInvalid, ts.UTC().Format(time.RFC3339))
	}
	if ts.After(now.Add(s.cfg.MaxSkew)) {
		return fmt.Errorf("%w: timestamp %s is %s ahead of the server's clock (%s); at most %s is accepted (seconds, not milliseconds?)",
			ErrInvalid, ts.UTC().Format(time.RFC3339Nano), ts.Sub(now).Round(time.Second), now.UTC().Format(time.RFC3339), s.cfg.MaxSkew)
	}
	if ts.Before(now.Add(-s.cfg.MaxAge)) {
		return fmt.Errorf("%w: timestamp %s is more than %s before the server's clock (%s)",
			ErrInvalid, ts.UTC().Format(time.RFC3339Nano), s.cfg.MaxAge, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Send accepts a send request under an idempotency key: it appends the
// request's events in one append. The same key with the same request
// answers as the first time and sends nothing again; with another
// request it fails with ErrKeyReused.
func (s *Service) Send(ctx context.Context, key string, in SendInput) (Accepted, error) {
	switch {
	case key == "" || len(key) > MaxKey:
		return Accepted{}, fmt.Errorf("%w: Idempotency-Key: want 1 to %d characters", ErrInvalid, MaxKey)
	case in.Type == "" || len(in.Type) > notify.MaxTypeLen:
		return Accepted{}, fmt.Errorf("%w: type: want 1 to %d bytes", ErrInvalid, notify.MaxTypeLen)
	case in.Sender == "" || len(in.Sender) > notify.MaxSenderLen:
		return Accepted{}, fmt.Errorf("%w: sender: want 1 to %d bytes", ErrInvalid, notify.MaxSenderLen)
	case in.ToClub && len(in.ToUsers) > 0:
		return Accepted{}, fmt.Errorf("%w: give to_users or to_club, not both", ErrInvalid)
	case !in.ToClub && len(in.ToUsers) == 0:
		return Accepted{}, fmt.Errorf("%w: to_users is empty (or set to_club)", ErrInvalid)
	case in.Timestamp != nil && in.Timestamp.IsZero():
		return Accepted{}, fmt.Errorf("%w: timestamp is the zero time", ErrInvalid)
	case len(in.ToUsers) > s.cfg.MaxRecipients:
		return Accepted{}, fmt.Errorf("%w: %d recipients, more than the limit of %d", ErrUnacceptable, len(in.ToUsers), s.cfg.MaxRecipients)
	}
	if _, ok := s.cfg.Templates[in.Type]; !ok {
		return Accepted{}, fmt.Errorf("%w: unknown notification type %q (GET /api/notification-types lists them)", ErrUnacceptable, in.Type)
	}
	id, hash := RequestID(in.Sender, key), in.hash()
	stream := requestStream(id)
	if acc, ok, err := s.existing(ctx, id, hash); ok || err != nil {
		return acc, err
	}
	// Checked after a retry is recognized: an accepted request sent
	// again later answers as the first time.
	if in.Timestamp != nil {
		if err := s.checkTimestamp(*in.Timestamp, time.Now()); err != nil {
			return Accepted{}, err
		}
	}
	ids := in.ToUsers
	if in.ToClub {
		var err error
		ids, err = s.cfg.Users.Members(ctx, in.ClubID, s.cfg.MaxRecipients)
		if errors.Is(err, userscdc.ErrTooManyMembers) {
			return Accepted{}, fmt.Errorf("%w: %v", ErrUnacceptable, err)
		}
		if err != nil {
			return Accepted{}, err
		}
		if len(ids) == 0 {
			return Accepted{}, fmt.Errorf("%w: club %d has no members", ErrUnacceptable, in.ClubID)
		}
	}
	listed := len(ids)
	distinct := slices.Clone(ids)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	ts := time.Now().UTC().Truncate(time.Millisecond)
	if in.Timestamp != nil {
		ts = in.Timestamp.UTC()
	}
	hdr := Requested{ID: id, Key: key, Hash: hash, Type: in.Type, ClubID: in.ClubID, Sender: in.Sender, Timestamp: ts,
		ToClub: in.ToClub, Listed: listed, Recipients: len(distinct), Chunks: (len(distinct) + s.cfg.ChunkSize - 1) / s.cfg.ChunkSize}
	data, err := json.Marshal(hdr)
	if err != nil {
		return Accepted{}, err
	}
	events := []eventstore.NewEvent{{ID: eventID(id, hash, "header"), Type: TypeRequested, Tags: []string{Tag}, Data: data}}
	for c := 0; c < hdr.Chunks; c++ {
		part := distinct[c*s.cfg.ChunkSize : min((c+1)*s.cfg.ChunkSize, len(distinct))]
		data, err := json.Marshal(Recipients{Request: id, Chunk: c, UserIDs: part})
		if err != nil {
			return Accepted{}, err
		}
		events = append(events, eventstore.NewEvent{ID: eventID(id, hash, "chunk", itoa(c)), Type: TypeRecipients, Data: data})
	}
	res, err := s.store.Append(ctx, stream, eventstore.NoStream, events)
	if errors.Is(err, eventstore.ErrVersionConflict) {
		// Sent concurrently under the same key: answer as that one.
		if acc, ok, err := s.existing(ctx, id, hash); ok || err != nil {
			return acc, err
		}
	}
	if err != nil {
		return Accepted{}, err
	}
	return Accepted{ID: id, Recipients: hdr.Recipients, Duplicates: listed - hdr.Recipients, Position: res.LastPosition, Duplicate: res.Duplicate}, nil
}

// existing answers a retry of request id: ok when the request exists.
func (s *Service) existing(ctx context.Context, id, hash string) (Accepted, bool, error) {
	stream := requestStream(id)
	evs, err := s.store.ReadStream(ctx, stream, 1, 1)
	if err != nil || len(evs) == 0 {
		return Accepted{}, false, err
	}
	var hdr Requested
	if err := json.Unmarshal(evs[0].Data, &hdr); err != nil {
		return Accepted{}, false, fmt.Errorf("notify: request %s: %w", id, err)
	}
	if hdr.Hash != hash {
		return Accepted{}, false, fmt.Errorf("%w: request %s was sent with this key and another body", ErrKeyReused, id)
	}
	last := evs[0].Position
	if hdr.Chunks > 0 {
		tail, err := s.store.ReadStreamBackward(ctx, stream, 0, 1)
		if err != nil {
			return Accepted{}, false, err
		}
		if len(tail) == 1 {
			last = tail[0].Position
		}
	}
	return Accepted{ID: id, Recipients: hdr.Recipients, Duplicates: hdr.Listed - hdr.Recipients, Position: last, Duplicate: true}, true, nil
}
