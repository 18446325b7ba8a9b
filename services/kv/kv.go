// Package kv is a versioned key/value repository for whole aggregates with
// optimistic concurrency: Add, Get, GetIfNotMatched, Exist, Update
// (compare-and-set on the version, which increments) and Delete (of a key
// and everything under it), with typed failures and no nil results.
//
// A Repository checks input and delegates to a Backend: the embedded one
// (package pebblekv, on Pebble), PostgreSQL (pgkv), Redis (rediskv), etcd
// (etcdkv) or Apache Cassandra (cassandrakv). Every backend passes the
// conformance suite in package kvtest.
//
// Ids are paths: "order/42/line/1" is under "order/42", and deleting
// "order/42" deletes it too. A key's version is 1 when added and grows by
// one with every update; a key deleted and added again starts at 1.
package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The failures of every operation; test them with errors.Is.
var (
	// ErrExists: Add of a key that exists.
	ErrExists = errors.New("kv: key exists")
	// ErrNotFound: Update or Delete of a key that does not exist.
	ErrNotFound = errors.New("kv: key not found")
	// ErrStale: Update or Delete with a version that is not the key's
	// current one. The error is a *StaleError with the current version.
	ErrStale = errors.New("kv: stale version")
	// ErrTimeout: the operation's deadline passed; it may or may not
	// have taken effect.
	ErrTimeout = errors.New("kv: timeout")
	// ErrUnavailable: the backend failed or could not be reached; the
	// operation may or may not have taken effect.
	ErrUnavailable = errors.New("kv: backend unavailable")
	// ErrInvalid: bad input, refused before anything was written. The
	// error is a *InvalidError saying what was wrong.
	ErrInvalid = errors.New("kv: invalid input")
)

// StaleError is the ErrStale of a compare-and-set that lost: Current is the
// version that won.
type StaleError struct {
	ID       string
	Expected uint64
	Current  uint64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("kv: %q is at version %d, not %d", e.ID, e.Current, e.Expected)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// InvalidError is an ErrInvalid: which input, and why.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "kv: " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// TooLargeError is the ErrInvalid of a value over the repository's
// MaxValueBytes, or over what its backend can store (Why says which
// limit). Size is -1 when the value was a stream cut off at the limit;
// Max is 0 when the backend refused the value at a limit of its own that
// it could not tell in advance (etcd's --max-request-bytes).
type TooLargeError struct {
	Size, Max int64
	Why       string
}

func (e *TooLargeError) Error() string {
	var s string
	switch {
	case e.Max <= 0: // the backend refused it, at a limit of its own
		s = fmt.Sprintf("kv: value of %d bytes, too large", e.Size)
	case e.Size < 0:
		s = fmt.Sprintf("kv: value of more than %d bytes", e.Max)
	default:
		s = fmt.Sprintf("kv: value of %d bytes, more than %d", e.Size, e.Max)
	}
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrInvalid }

// SourceError is the failure to read the stream a value was put from
// (AddFrom, UpdateFrom): nothing was written.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return "kv: reading the value: " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// BatchError says which item of a batch failed. Batches are atomic: when
// one item fails, none is written.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("kv: batch item %d: %v", e.Index, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }

func notFound(id string) error { return fmt.Errorf("%w: %q", ErrNotFound, id) }
func exists(id string) error   { return fmt.Errorf("%w: %q", ErrExists, id) }

// NotFound returns ErrNotFound naming id; for backends.
func NotFound(id string) error { return notFound(id) }

// Exists returns ErrExists naming id; for backends.
func Exists(id string) error { return exists(id) }

// Stale returns the *StaleError of id; for backends.
func Stale(id string, expected, current uint64) error {
	return &StaleError{ID: id, Expected: expected, Current: current}
}

// Entry is a stored value and its version.
type Entry struct {
	ID      string
	Version uint64
	Value   []byte
}

// Item is one element of a batch: for AddBatch the id and value, for
// UpdateBatch also the version it expects.
type Item struct {
	ID      string
	Version uint64
	Value   []byte
}

// Match is GetIfNotMatched's three-way answer.
type Match int

const (
	// Absent: no such key.
	Absent Match = iota
	// Modified: the key's version differs from the one given; the entry
	// is returned.
	Modified
	// NotModified: the key is at the version given.
	NotModified
)

func (m Match) String() string {
	switch m {
	case Absent:
		return "absent"
	case Modified:
		return "modified"
	case NotModified:
		return "not modified"
	}
	return fmt.Sprintf("Match(%d)", int(m))
}

// Backend is what a storage engine implements. The Repository has checked
// the input: ids are valid, a batch is not empty, within limits and has
// no id twice. Batches are atomic; a failing item is reported as a
// *BatchError. Update returns the new versions.
type Backend interface {
	Get(ctx context.Context, id string) (Entry, bool, error)
	Add(ctx context.Context, items []Item) error
	Update(ctx context.Context, items []Item) ([]uint64, error)
	Delete(ctx context.Context, id string, version uint64) error
	Close() error
}

// Reader is a stored value read as a stream: its id, version and size in
// bytes, and the bytes. Close it.
type Reader struct {
	ID      string
	Version uint64
	Size    int64
	io.ReadCloser
}

// Streamer is a Backend that can read a value as a stream, without holding
// all of it in memory (pebblekv reads a large value from its own file).
// Open returns false when the key does not exist.
type Streamer interface {
	Open(ctx context.Context, id string) (Reader, bool, error)
}

// StreamWriter is a Backend that can store a value read from a stream
// without holding all of it in memory (pebblekv writes a large value to a
// file of its own as it reads it). The Repository has checked the id and
// version, and bounds src: reading past the limit fails, and the backend
// must then write nothing and return the read's error.
type StreamWriter interface {
	AddFrom(ctx context.Context, id string, src io.Reader) error
	UpdateFrom(ctx context.Context, id string, version uint64, src io.Reader) (uint64, error)
}

// ValueLimiter is a Backend that cannot store values over a size: etcd
// refuses a request over its server's limit, Cassandra a mutation over
// half its commit log segment. ValueLimit returns that size and why.
type ValueLimiter interface {
	ValueLimit() (max int64, why string)
}

// BackendValueLimit is the largest value b can store, and why (0 and ""
// when b has no limit of its own).
func BackendValueLimit(b Backend) (int64, string) {
	if l, ok := b.(ValueLimiter); ok {
		return l.ValueLimit()
	}
	return 0, ""
}

// Limits bound what one request may hold.
type Limits struct {
	MaxIDBytes int // default 512
	// MaxValueBytes is the largest value (default 8 MiB). A value put
	// with AddFrom or UpdateFrom into a StreamWriter backend is never
	// held whole in memory, whatever its size; into another backend it
	// is, once, so a larger limit there is that much more memory per
	// write in flight.
	MaxValueBytes int
	MaxBatchItems int // default 32,768
	MaxBatchBytes int // values of one batch together; default 64 MiB
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{MaxIDBytes: 512, MaxValueBytes: 8 << 20, MaxBatchItems: 32768, MaxBatchBytes: 64 << 20}

func (l Limits) withDefaults() Limits {
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = DefaultLimits.MaxIDBytes
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultLimits.MaxValueBytes
	}
	if l.MaxBatchItems <= 0 {
		l.MaxBatchItems = DefaultLimits.MaxBatchItems
	}
	if l.MaxBatchBytes <= 0 {
		l.MaxBatchBytes = DefaultLimits.MaxBatchBytes
	}
	return l
}

// Repository is the versioned repository over one backend. It is safe for
// concurrent use.
type Repository struct {
	b   Backend
	lim Limits
	why string // the backend's reason for MaxValueBytes, when it lowered it
}

// New returns a repository on b. A MaxValueBytes over what b can store
// (BackendValueLimit) is lowered to it, so that a value too large for the
// backend is refused as a *TooLargeError, not failed by the backend.
func New(b Backend, lim Limits) *Repository {
	lim = lim.withDefaults()
	r := &Repository{b: b, lim: lim}
	if max, why := BackendValueLimit(b); max > 0 && int64(lim.MaxValueBytes) > max {
		r.lim.MaxValueBytes, r.why = int(max), why
	}
	return r
}

// Limits returns the repository's limits.
func (r *Repository) Limits() Limits { return r.lim }

// Close closes the backend.
func (r *Repository) Close() error { return r.b.Close() }

// ValidID checks an id: 1 to MaxIDBytes bytes of UTF-8 without control
// characters, segments separated by single '/', none empty (no leading,
// trailing or doubled '/').
func (r *Repository) ValidID(id string) error {
	switch {
	case id == "":
		return &InvalidError{"empty id"}
	case len(id) > r.lim.MaxIDBytes:
		return &InvalidError{fmt.Sprintf("id of %d bytes, more than %d", len(id), r.lim.MaxIDBytes)}
	case !utf8.ValidString(id):
		return &InvalidError{"id is not UTF-8"}
	case strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/"):
		return &InvalidError{fmt.Sprintf("id %q starts or ends with '/'", id)}
	case strings.Contains(id, "//"):
		return &InvalidError{fmt.Sprintf("id %q has an empty segment ('//')", id)}
	}
	for _, c := range id {
		if c < 0x20 || c == 0x7f {
			return &InvalidError{fmt.Sprintf("id %q has a control character", id)}
		}
	}
	return nil
}

func (r *Repository) validValue(v []byte) error {
	if len(v) > r.lim.MaxValueBytes {
		return &TooLargeError{Size: int64(len(v)), Max: int64(r.lim.MaxValueBytes), Why: r.why}
	}
	return nil
}

func (r *Repository) validBatch(items []Item, update bool) error {
	if len(items) == 0 {
		return &InvalidError{"empty batch"}
	}
	if len(items) > r.lim.MaxBatchItems {
		return &InvalidError{fmt.Sprintf("batch of %d items, more than %d", len(items), r.lim.MaxBatchItems)}
	}
	total := 0
	seen := make(map[string]struct{}, len(items))
	for i, it := range items {
		if err := r.ValidID(it.ID); err != nil {
			return &BatchError{Index: i, Err: err}
		}
		if err := r.validValue(it.Value); err != nil {
			return &BatchError{Index: i, Err: err}
		}
		if update && it.Version == 0 {
			return &BatchError{Index: i, Err: &InvalidError{"version 0: versions start at 1"}}
		}
		if _, dup := seen[it.ID]; dup {
			return &BatchError{Index: i, Err: &InvalidError{fmt.Sprintf("id %q twice in one batch", it.ID)}}
		}
		seen[it.ID] = struct{}{}
		total += len(it.Value)
	}
	// One value is bounded by MaxValueBytes alone, which may be the
	// larger limit.
	if len(items) > 1 && total > r.lim.MaxBatchBytes {
		return &InvalidError{fmt.Sprintf("batch of %d value bytes, more than %d", total, r.lim.MaxBatchBytes)}
	}
	return nil
}

// single returns the error of a one-item batch as the item's own error.
func single(err error) error {
	var be *BatchError
	if errors.As(err, &be) {
		return be.Err
	}
	return err
}

// Add stores a new key at version 1; ErrExists if it exists.
func (r *Repository) Add(ctx context.Context, id string, value []byte) error {
	if err := r.validBatch([]Item{{ID: id, Value: value}}, false); err != nil {
		return single(err)
	}
	return single(Classify(ctx, r.b.Add(ctx, []Item{{ID: id, Value: value}})))
}

// AddFrom adds a key whose value is read from src, to its end: as Add,
// but on a StreamWriter backend the value is never held whole in memory.
// A value over MaxValueBytes is a *TooLargeError and a failed read of
// src a *SourceError; either way nothing is written.
func (r *Repository) AddFrom(ctx context.Context, id string, src io.Reader) error {
	if err := r.ValidID(id); err != nil {
		return err
	}
	ls := r.limit(src)
	if w, ok := r.b.(StreamWriter); ok {
		return ls.fail(single(Classify(ctx, w.AddFrom(ctx, id, ls))))
	}
	value, err := io.ReadAll(ls)
	if err != nil {
		return ls.fail(err)
	}
	return r.Add(ctx, id, value)
}

// UpdateFrom is Update with the value read from src, as AddFrom.
func (r *Repository) UpdateFrom(ctx context.Context, id string, version uint64, src io.Reader) (uint64, error) {
	if err := r.ValidID(id); err != nil {
		return 0, err
	}
	if version == 0 {
		return 0, &InvalidError{"version 0: versions start at 1"}
	}
	ls := r.limit(src)
	if w, ok := r.b.(StreamWriter); ok {
		v, err := w.UpdateFrom(ctx, id, version, ls)
		if err != nil {
			return 0, ls.fail(single(Classify(ctx, err)))
		}
		return v, nil
	}
	value, err := io.ReadAll(ls)
	if err != nil {
		return 0, ls.fail(err)
	}
	return r.Update(ctx, id, version, value)
}

func (r *Repository) limit(src io.Reader) *limitedSource {
	return &limitedSource{src: src, left: int64(r.lim.MaxValueBytes), max: int64(r.lim.MaxValueBytes), why: r.why}
}

// limitedSource reads a value's stream up to the repository's limit, and
// remembers why a read failed: the limit, or the stream itself.
type limitedSource struct {
	src       io.Reader
	left, max int64
	why       string
	err       error // the first failure, as the repository reports it
}

func (l *limitedSource) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	// Ask for one byte more than the limit allows: a stream that has
	// it is too large.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.src.Read(p)
	if int64(n) > l.left {
		l.err = &TooLargeError{Size: -1, Max: l.max, Why: l.why}
		return 0, l.err
	}
	l.left -= int64(n)
	if err != nil && err != io.EOF {
		var tl *TooLargeError
		if !errors.As(err, &tl) {
			err = &SourceError{Err: err}
		}
		l.err = err
	}
	return n, err
}

// fail returns the stream's own failure when there was one (the backend
// may have wrapped it), else err.
func (l *limitedSource) fail(err error) error {
	if err != nil && l.err != nil {
		return l.err
	}
	return err
}

// AddBatch adds every item or, if one fails (a *BatchError says which),
// none.
func (r *Repository) AddBatch(ctx context.Context, items []Item) error {
	if err := r.validBatch(items, false); err != nil {
		return err
	}
	return Classify(ctx, r.b.Add(ctx, items))
}

// Get returns the key's entry, or false when it does not exist.
func (r *Repository) Get(ctx context.Context, id string) (Entry, bool, error) {
	if err := r.ValidID(id); err != nil {
		return Entry{}, false, err
	}
	e, ok, err := r.b.Get(ctx, id)
	if err != nil {
		return Entry{}, false, Classify(ctx, err)
	}
	return e, ok, nil
}

// GetIfNotMatched returns Absent when the key does not exist, NotModified
// (and no entry) when it is at version, and Modified with the entry when
// its version differs.
func (r *Repository) GetIfNotMatched(ctx context.Context, id string, version uint64) (Entry, Match, error) {
	e, ok, err := r.Get(ctx, id)
	switch {
	case err != nil:
		return Entry{}, Absent, err
	case !ok:
		return Entry{}, Absent, nil
	case e.Version == version:
		return Entry{}, NotModified, nil
	}
	return e, Modified, nil
}

// Open returns the key's value as a stream, or false when the key does
// not exist. A backend that is a Streamer reads it as it is consumed;
// others read it whole. The caller closes the Reader.
func (r *Repository) Open(ctx context.Context, id string) (Reader, bool, error) {
	if err := r.ValidID(id); err != nil {
		return Reader{}, false, err
	}
	if s, ok := r.b.(Streamer); ok {
		rd, ok, err := s.Open(ctx, id)
		if err != nil {
			return Reader{}, false, Classify(ctx, err)
		}
		return rd, ok, nil
	}
	e, ok, err := r.b.Get(ctx, id)
	if err != nil || !ok {
		return Reader{}, false, Classify(ctx, err)
	}
	return Reader{ID: id, Version: e.Version, Size: int64(len(e.Value)), ReadCloser: io.NopCloser(bytes.NewReader(e.Value))}, true, nil
}

// Exist tells whether the key exists. On a Streamer backend it does not
// read the value.
func (r *Repository) Exist(ctx context.Context, id string) (bool, error) {
	if _, ok := r.b.(Streamer); ok {
		rd, ok, err := r.Open(ctx, id)
		if ok {
			_ = rd.Close()
		}
		return ok, err
	}
	_, ok, err := r.Get(ctx, id)
	return ok, err
}

// probeID is an id no one can store (ValidID refuses control characters):
// Healthy's read through the backend finds nothing, whatever the keys, so
// it never reads a value.
const probeID = "\x01healthz"

// Healthy says whether the repository can serve: nil, or why not. A
// backend with a Healthy() error method (pebblekv, after a failed commit
// that makes it refuse every later write) is asked first; then a read of
// an id that cannot exist goes through the backend, so a backend that
// cannot be reached fails too. It reads no value: /healthz, which anyone
// may ask, costs a lookup, never the read of a large value.
func (r *Repository) Healthy(ctx context.Context) error {
	if h, ok := r.b.(interface{ Healthy() error }); ok {
		if err := h.Healthy(); err != nil {
			return err
		}
	}
	_, _, err := r.b.Get(ctx, probeID)
	return Classify(ctx, err)
}

// Update replaces the key's value if it is at version, and returns the new
// version (version+1). ErrNotFound if the key does not exist, a
// *StaleError if it is at another version.
func (r *Repository) Update(ctx context.Context, id string, version uint64, value []byte) (uint64, error) {
	items := []Item{{ID: id, Version: version, Value: value}}
	if err := r.validBatch(items, true); err != nil {
		return 0, single(err)
	}
	vs, err := r.b.Update(ctx, items)
	if err != nil {
		return 0, single(Classify(ctx, err))
	}
	return vs[0], nil
}

// UpdateBatch updates every item (each at its own expected version) or,
// if one fails (a *BatchError says which), none; it returns the new
// versions.
func (r *Repository) UpdateBatch(ctx context.Context, items []Item) ([]uint64, error) {
	if err := r.validBatch(items, true); err != nil {
		return nil, err
	}
	vs, err := r.b.Update(ctx, items)
	if err != nil {
		return nil, Classify(ctx, err)
	}
	return vs, nil
}

// Delete removes the key, if it is at version, and every key under it
// (whose id starts with id + "/"). ErrNotFound if the key does not exist,
// a *StaleError if it is at another version.
func (r *Repository) Delete(ctx context.Context, id string, version uint64) error {
	if err := r.ValidID(id); err != nil {
		return err
	}
	if version == 0 {
		return &InvalidError{"version 0: versions start at 1"}
	}
	return Classify(ctx, r.b.Delete(ctx, id, version))
}

// Classify maps a backend's failure to the repository's errors: its own
// errors pass, a passed deadline is ErrTimeout, anything else
// ErrUnavailable (wrapping the cause).
func Classify(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrExists), errors.Is(err, ErrNotFound), errors.Is(err, ErrStale),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrTimeout), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Codec turns a T into bytes and back.
type Codec[T any] interface {
	Marshal(T) ([]byte, error)
	Unmarshal([]byte) (T, error)
}

// Typed is a repository of T values through a codec.
type Typed[T any] struct {
	R     *Repository
	Codec Codec[T]
}

// Versioned is a T and its version.
type Versioned[T any] struct {
	Version uint64
	Value   T
}

// Add stores a new T.
func (t Typed[T]) Add(ctx context.Context, id string, v T) error {
	b, err := t.Codec.Marshal(v)
	if err != nil {
		return &InvalidError{"encoding: " + err.Error()}
	}
	return t.R.Add(ctx, id, b)
}

// Get returns the T, or false when the key does not exist.
func (t Typed[T]) Get(ctx context.Context, id string) (Versioned[T], bool, error) {
	e, ok, err := t.R.Get(ctx, id)
	if err != nil || !ok {
		return Versioned[T]{}, ok, err
	}
	v, err := t.Codec.Unmarshal(e.Value)
	if err != nil {
		return Versioned[T]{}, false, fmt.Errorf("kv: decoding %q: %w", id, err)
	}
	return Versioned[T]{Version: e.Version, Value: v}, true, nil
}

// Update replaces the T if the key is at version, returning the new one.
func (t Typed[T]) Update(ctx context.Context, id string, version uint64, v T) (uint64, error) {
	b, err := t.Codec.Marshal(v)
	if err != nil {
		return 0, &InvalidError{"encoding: " + err.Error()}
	}
	return t.R.Update(ctx, id, version, b)
}

// Delete removes the key and everything under it, if it is at version.
func (t Typed[T]) Delete(ctx context.Context, id string, version uint64) error {
	return t.R.Delete(ctx, id, version)
}

// JSON is the Codec of encoding/json.
type JSON[T any] struct{}

// Marshal encodes v as JSON.
func (JSON[T]) Marshal(v T) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes JSON into a T.
func (JSON[T]) Unmarshal(b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}
