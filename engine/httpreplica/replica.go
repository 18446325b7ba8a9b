// Package httpreplica lets a read model run in another process than the
// store: Store is a read-only eventstore.Store that follows a logbook
// server over HTTP — the log's head from /healthz, the events from the
// live stream query /queries/all — so that projection runners (and
// the views they feed) work on it unchanged. The embedded store is one
// process's; its read replicas are processes like this one.
package httpreplica

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
	"github.com/logbook/logbook/engine/query"
)

// Errors of the primary's stream that reading again cannot mend: they end
// a read or a subscription.
var (
	// ErrLineTooLong: a line of the stream is over MaxLine bytes.
	ErrLineTooLong = errors.New("replica: line of the primary's stream too long")
	// ErrGap: the stream skipped a position (5, then 7). The log has no
	// gaps, so an event was lost on the way; a view that went on would
	// silently lack it.
	ErrGap = errors.New("replica: gap in the primary's stream")
)

// ErrPrimary is an error the primary reported in its stream, after its
// 200 (its store failed in the middle of a query, say): a read returns it
// with what came before; a subscription reconnects, as when the stream
// breaks.
var ErrPrimary = errors.New("replica: the primary's query failed")

// errMalformed is a line of the stream that is not an event: the
// subscription logs it and reconnects.
var errMalformed = errors.New("replica: malformed event line")

// MaxLine bounds one line of the primary's stream, so that a broken or
// hostile primary cannot make the replica hold a line without end. One
// event is at most 1 MiB by default (eventstore.Limits); its JSON line,
// with base64 and escapes, stays well within this bound.
const MaxLine = 8 << 20

// Store follows the primary at base (http://host:port) with a bearer token.
// Its writes return eventstore.ErrReadOnly; the reads a projection of the
// whole log does not need (ReadStream, ReadStreamBackward, ReadTag,
// ListStreams, StreamVersion, LoadSnapshot, and Subscribe with a stream or
// tag filter) return an error that matches errors.ErrUnsupported.
type Store struct {
	backend.ReadOnly // Append and SaveSnapshot

	// Log receives the subscription's warnings: malformed lines, broken
	// streams, reconnects. Nil means slog.Default().
	Log    *slog.Logger
	base   string
	token  string
	client *http.Client
}

var _ eventstore.Store = (*Store)(nil)

// New returns a Store following base.
func New(base, token string) *Store {
	return NewWithOptions(base, token, Options{})
}

// Options are a Store's settings.
type Options struct {
	// TLS is the client side of an https:// primary: the CAs that sign
	// its certificate (RootCAs; nil: the system's) and the replica's own
	// certificate, if the primary asks for one (mutual TLS). Nil: Go's
	// defaults.
	TLS *tls.Config
}

// NewWithOptions returns a Store following base with o's settings.
func NewWithOptions(base, token string, o Options) *Store {
	client := &http.Client{}
	if o.TLS != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = o.TLS
		client.Transport = t
	}
	return &Store{base: strings.TrimRight(base, "/"), token: token, client: client}
}

func (s *Store) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		return nil, fmt.Errorf("replica: GET %s: %s: %s", path, res.Status, strings.TrimSpace(string(body)))
	}
	return res, nil
}

// Head reads the primary's last position, trying three times: a
// projection runner stops on a failed Head, and one lost request should not
// stop a replica's view.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	var res *http.Response
	var err error
	for try := 0; try < 3; try++ {
		if try > 0 {
			select {
			case <-time.After(time.Duration(try) * 200 * time.Millisecond):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if res, err = s.get(ctx, "/healthz"); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var h struct {
		Head uint64 `json:"head"`
	}
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("replica: /healthz: %w", err)
	}
	return h.Head, nil
}

// ReadAll reads up to max events from position from (a current query).
func (s *Store) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	if max <= 0 {
		max = 1000
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the stream once we have enough
	res, err := s.get(ctx, "/queries/all?removed=true&from="+strconv.FormatUint(max1(from), 10))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	st := &stream{body: res.Body, r: bufio.NewReaderSize(res.Body, 1<<16)}
	var out []eventstore.Event
	want := max1(from)
	for len(out) < max {
		ev, removed, err := st.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		if removed > 0 {
			if removed >= want {
				want = removed + 1
			}
			continue
		}
		if ev.Position != want {
			return out, fmt.Errorf("%w: position %d where %d was due", ErrGap, ev.Position, want)
		}
		out = append(out, ev)
		want++
	}
	return out, nil
}

func (s *Store) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func max1(v uint64) uint64 {
	if v == 0 {
		return 1
	}
	return v
}

// Subscribe follows every event from position from, live. Only the
// all-events filter is offered: it is what a projection of the whole log
// needs.
func (s *Store) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if f.Kind != eventstore.FilterAll {
		return nil, unsupported("Subscribe to " + f.String() + " (only the all-events subscription)")
	}
	subCtx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel) // the connect obeys ctx; the stream outlives it
	res, err := s.get(subCtx, "/queries/all?live=true&removed=true&from="+strconv.FormatUint(max1(from), 10))
	if !stop() && err == nil {
		err = ctx.Err()
		res.Body.Close()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	sub := &subscription{
		ctx:    subCtx,
		cancel: cancel,
		events: make(chan result, 4096),
	}
	sub.cursor.Store(max1(from))
	reconnect := func(from uint64) (*stream, error) {
		res, err := s.get(subCtx, "/queries/all?live=true&removed=true&from="+strconv.FormatUint(from, 10))
		if err != nil {
			return nil, err
		}
		return &stream{body: res.Body, r: bufio.NewReaderSize(res.Body, 1<<16)}, nil
	}
	go sub.pump(&stream{body: res.Body, r: bufio.NewReaderSize(res.Body, 1<<16)}, max1(from), reconnect, s.logger())
	return sub, nil
}

type result struct {
	ev  eventstore.Event
	err error
}

// subscription decodes the live stream on a goroutine of its own, so that
// Next can take whatever has arrived without blocking mid-line. The
// channel is bounded: a slow consumer slows the stream, and TCP carries
// the back-pressure to the primary.
type subscription struct {
	ctx     context.Context // ends at Close
	cursor  atomic.Uint64
	pending error // met while gathering a batch; returned by the next call
	cancel  context.CancelFunc
	events  chan result
}

// pump decodes the stream into the channel. When the stream ends or
// breaks — the primary restarted, the network blinked, a line was
// malformed — it logs why and reconnects from the position after the last
// event it delivered, backing off up to five seconds between tries, until
// the subscription is closed: a replica should outlive its primary's
// restarts, not serve stale answers after one. A gap in the positions or
// an overlong line ends the subscription with an error instead, since
// reading again cannot mend them.
func (s *subscription) pump(st *stream, next uint64, reconnect func(from uint64) (*stream, error), log *slog.Logger) {
	defer close(s.events)
	send := func(r result) bool {
		select {
		case s.events <- r:
			return true
		case <-s.ctx.Done():
			return false
		}
	}
	backoff := 100 * time.Millisecond
	for {
		ev, removed, err := st.next()
		if s.ctx.Err() != nil {
			st.body.Close()
			return // closed: Next reports ErrClosed
		}
		if err == nil && removed > 0 {
			// The primary removed these positions: not a gap.
			next = max(next, removed+1)
			continue
		}
		if err == nil && ev.Position > next {
			err = fmt.Errorf("%w: position %d where %d was due", ErrGap, ev.Position, next)
		}
		if err == nil {
			if ev.Position < next {
				continue // already delivered before a reconnect
			}
			if !send(result{ev: ev}) {
				st.body.Close()
				return
			}
			next = ev.Position + 1
			backoff = 100 * time.Millisecond
			continue
		}
		st.body.Close()
		if errors.Is(err, ErrGap) || errors.Is(err, ErrLineTooLong) {
			log.Error("replica: the primary's stream cannot be followed", "from", next, "err", err)
			send(result{err: err})
			return
		}
		if errors.Is(err, errMalformed) {
			log.Warn("replica: malformed line in the primary's stream; reconnecting", "from", next, "err", err)
		} else {
			log.Warn("replica: the primary's stream ended; reconnecting", "from", next, "err", err)
		}
		for try := 1; ; try++ {
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			if st, err = reconnect(next); err == nil {
				log.Info("replica: reconnected to the primary", "from", next, "tries", try)
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			log.Warn("replica: reconnect to the primary failed", "from", next, "tries", try, "err", err)
		}
	}
}

// Next implements eventstore.Subscription.
func (s *subscription) Next(ctx context.Context) ([]eventstore.Event, error) {
	if s.ctx.Err() != nil {
		return nil, eventstore.ErrClosed
	}
	if err := s.pending; err != nil {
		return nil, err
	}
	var out []eventstore.Event
	select {
	case r, ok := <-s.events:
		if !ok {
			return nil, eventstore.ErrClosed
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, r.ev)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < 1024 {
		select {
		case r, ok := <-s.events:
			if !ok || r.err != nil {
				s.pending = r.err
				if !ok {
					s.pending = eventstore.ErrClosed
				}
				s.cursor.Store(out[len(out)-1].Position + 1)
				return out, nil
			}
			out = append(out, r.ev)
		default:
			s.cursor.Store(out[len(out)-1].Position + 1)
			return out, nil
		}
	}
	s.cursor.Store(out[len(out)-1].Position + 1)
	return out, nil
}

// Cursor implements eventstore.Subscription.
func (s *subscription) Cursor() uint64 { return s.cursor.Load() }

// Close implements eventstore.Subscription.
func (s *subscription) Close() error {
	s.cancel()
	return nil
}

// stream decodes NDJSON events, skipping heartbeat lines.
type stream struct {
	body io.ReadCloser
	r    *bufio.Reader
	buf  []byte // the line being read
}

// line returns the next line (reused by the next call), at most MaxLine
// bytes, and io.EOF at the end of the stream; a last line without its
// line break is io.ErrUnexpectedEOF, a connection cut mid-line.
func (st *stream) line() ([]byte, error) {
	st.buf = st.buf[:0]
	for {
		frag, err := st.r.ReadSlice('\n')
		if len(st.buf)+len(frag) > MaxLine {
			return nil, fmt.Errorf("%w: over %d bytes", ErrLineTooLong, MaxLine)
		}
		if n := len(st.buf) + len(frag); n > cap(st.buf) {
			// Double, rather than append's gentler growth for large
			// slices: a line near the limit then costs about twice it.
			grown := make([]byte, len(st.buf), min(max(2*cap(st.buf), n), MaxLine))
			copy(grown, st.buf)
			st.buf = grown
		}
		st.buf = append(st.buf, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(st.buf)) > 0:
			return st.buf, io.ErrUnexpectedEOF
		}
		return st.buf, err
	}
}

// next returns the stream's next event, or with removedThrough > 0 the
// primary's word that every position up to it not yet delivered was
// removed from its log (deleted or expired events: not a loss).
func (st *stream) next() (ev eventstore.Event, removedThrough uint64, err error) {
	for {
		line, err := st.line()
		if err != nil {
			return eventstore.Event{}, 0, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var j struct {
			query.EventJSON
			query.Removed
			// Error: the primary's query failed after its 200 (see
			// engine/query: {"error": problem}).
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &j); err != nil {
			return eventstore.Event{}, 0, fmt.Errorf("%w: %v", errMalformed, err)
		}
		if len(j.Error) > 0 && string(j.Error) != "null" {
			var p struct {
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(j.Error, &p)
			return eventstore.Event{}, 0, fmt.Errorf("%w: %s", ErrPrimary, p.Detail)
		}
		if j.Through > 0 {
			return eventstore.Event{}, j.Through, nil
		}
		if j.Position == 0 {
			continue // not an event (a heartbeat or a control line)
		}
		ev, err := fromJSON(j.EventJSON)
		return ev, 0, err
	}
}

func fromJSON(j query.EventJSON) (eventstore.Event, error) {
	id, err := eventstore.ParseID(j.ID)
	if err != nil {
		return eventstore.Event{}, fmt.Errorf("%w: event %d: %v", errMalformed, j.Position, err)
	}
	ev := eventstore.Event{
		Stream: j.Stream, Seq: j.Seq, Position: j.Position, ID: id, Type: j.Type, Version: j.Version,
		Tags: j.Tags, Meta: j.Meta, Time: j.Time, Data: []byte(j.Data),
	}
	if j.DataBase64 != nil {
		ev.Data = *j.DataBase64
	}
	return ev, nil
}

// The rest of eventstore.Store's reads: a projection of the whole log
// needs none of them.

func unsupported(what string) error {
	return fmt.Errorf("httpreplica: %s: %w by a replica following over HTTP", what, errors.ErrUnsupported)
}

func (s *Store) ReadStream(context.Context, string, uint64, int) ([]eventstore.Event, error) {
	return nil, unsupported("ReadStream")
}
func (s *Store) ReadStreamBackward(context.Context, string, uint64, int) ([]eventstore.Event, error) {
	return nil, unsupported("ReadStreamBackward")
}
func (s *Store) ReadTag(context.Context, string, uint64, int) ([]eventstore.Event, error) {
	return nil, unsupported("ReadTag")
}
func (s *Store) ListStreams(context.Context, string, int) ([]string, error) {
	return nil, unsupported("ListStreams")
}
func (s *Store) StreamVersion(context.Context, string) (uint64, error) {
	return 0, unsupported("StreamVersion")
}
func (s *Store) LoadSnapshot(context.Context, string) (eventstore.Snapshot, bool, error) {
	return eventstore.Snapshot{}, false, unsupported("LoadSnapshot")
}

// Close drops idle connections.
func (s *Store) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
