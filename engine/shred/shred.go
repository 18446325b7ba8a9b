// Package shred is crypto-shredding: personal data kept in events, views
// and snapshots is encrypted under a data key of its own per data subject
// (a user, a customer), and forgetting the subject destroys that key.
// The events stay in the log, in their order, but the fields sealed under
// the key can no longer be read by anyone — in the store, on the Kafka
// topic, in snapshots, in views rebuilt from the log.
//
// A [Keyring] holds the data keys: one random AES-256 key per subject,
// stored wrapped (AES-256-GCM) under a master key that is given to the
// process by file or environment, never stored beside the keys. Its
// backends are a Pebble database in a directory of its own ([OpenDir],
// beside an embedded store) and a table in PostgreSQL ([OpenPostgres]).
// Subjects are never stored in clear: the keyring's keys, the envelopes
// and the audit event name a subject by a keyed hash of its id
// (HMAC-SHA-256 under a key derived from the master key), which only a
// holder of the master key can recompute.
//
// [Keyring.Seal] encrypts one field of one subject with AES-256-GCM, the
// subject's id and the field's name as additional data, into an envelope
// ([Envelope]) that says which subject (by its hash) and which key
// version it belongs to. [Keyring.Open] decrypts it, or answers
// [ErrForgotten] once the subject was forgotten: readers render the
// field as forgotten rather than fail. [Keyring.Forget] destroys the
// subject's key durably, leaves a tombstone so that no new key is made
// for the subject (data that arrives about it again is refused with
// ErrForgotten, not sealed under a fresh key), and appends an audit event
// to the stream [AuditStream] saying that a subject was forgotten, when
// and by whom, and nothing of what was forgotten.
//
// An event payload declares a personal field as a [Sealed]: made by
// [Keyring.SealField] before the command is decided, it is ciphertext in
// the event's JSON, and [Sealed.Show] renders it as [ForgottenText] once
// its subject is forgotten. [Keyring.Reforget] replays the audit stream
// into a keyring restored from a backup older than a forgetting, which
// would otherwise hold the destroyed key again.
package shred

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	gohash "hash"
	"sync"
	"sync/atomic"
	"time"
)

// Errors, to test for with errors.Is.
var (
	// ErrForgotten is an Open or a Seal for a subject that was forgotten:
	// its key is destroyed and its sealed fields cannot be read.
	ErrForgotten = errors.New("shred: the subject was forgotten")
	// ErrWrongMasterKey is a keyring opened with another master key than
	// the one its keys were wrapped under.
	ErrWrongMasterKey = errors.New("shred: wrong master key for this keyring")
	// ErrTampered is an envelope that fails authentication: altered,
	// truncated, or sealed for another subject or field.
	ErrTampered = errors.New("shred: ciphertext fails authentication (altered, or sealed for another subject or field)")
	// ErrNotSealed is a value that is not an envelope of this package.
	ErrNotSealed = errors.New("shred: not a sealed value")
	// ErrNoKey is an Open for a subject with no key and no tombstone: the
	// envelope comes from another keyring (or its key store was lost).
	ErrNoKey = errors.New("shred: no key for the subject in this keyring")
)

// The envelope: magic, format, the subject's tag (the first 16 bytes of
// its keyed hash), the key version, the GCM nonce, then the ciphertext
// with its 16-byte tag.
const (
	magic       = 'S'
	format1     = 1
	tagLen      = 16
	headerLen   = 2 + tagLen + 4
	nonceLen    = 12
	overheadLen = headerLen + nonceLen + 16
	// StringPrefix begins the text form of an envelope (SealString).
	StringPrefix = "shred1:"
)

// Overhead is how many bytes an envelope adds to its plaintext.
const Overhead = overheadLen

// Envelope is what an envelope says about itself without a key.
type Envelope struct {
	SubjectTag [tagLen]byte // the first 16 bytes of the subject's keyed hash
	KeyVersion uint32
}

// ParseEnvelope reads an envelope's header.
func ParseEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if len(b) < overheadLen || b[0] != magic || b[1] != format1 {
		return e, ErrNotSealed
	}
	copy(e.SubjectTag[:], b[2:2+tagLen])
	e.KeyVersion = binary.BigEndian.Uint32(b[2+tagLen:])
	return e, nil
}

// IsSealed reports whether b looks like an envelope (its header only).
func IsSealed(b []byte) bool { _, err := ParseEnvelope(b); return err == nil }

// Forgotten describes one subject's key destroyed.
type Forgotten struct {
	SubjectHash string    `json:"subject_hash"` // hex of the keyed hash
	KeyVersion  uint32    `json:"key_version"`  // 0: the subject never had a key
	At          time.Time `json:"at"`
	By          string    `json:"by"`
	Position    uint64    `json:"position,omitempty"` // of the audit event, when there is an audit stream
}

// The keyring's records: a live key or a tombstone.
const (
	recKey       = 1
	recTombstone = 2
)

// record is a stored key record: kind, version, then for a key its
// wrapping (nonce, wrapped key and tag); for a tombstone the time.
type record struct {
	kind    byte
	version uint32
	wrapped []byte // recKey
	at      int64  // recTombstone: unix nanoseconds
}

func (r record) encode() []byte {
	b := []byte{r.kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], r.version)
	if r.kind == recKey {
		return append(b, r.wrapped...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(r.at))
}

func decodeRecord(b []byte) (record, error) {
	if len(b) < 5 {
		return record{}, errCorrupt
	}
	r := record{kind: b[0], version: binary.BigEndian.Uint32(b[1:5])}
	switch {
	case r.kind == recKey && len(b) == 5+nonceLen+32+16:
		r.wrapped = bytes.Clone(b[5:])
	case r.kind == recTombstone && len(b) == 13:
		r.at = int64(binary.BigEndian.Uint64(b[5:]))
	default:
		return record{}, errCorrupt
	}
	return r, nil
}

var errCorrupt = errors.New("shred: corrupt key record")

// hash is a subject's keyed hash.
type hash [32]byte

// backend stores the records by the subject's hash, and the master key's
// check value.
type backend interface {
	// check stores v as the check value if there is none and returns
	// the stored one.
	check(ctx context.Context, v []byte) ([]byte, error)
	// get returns the records of hs that exist.
	get(ctx context.Context, hs []hash) (map[hash][]byte, error)
	// create stores, durably, each record whose subject has none yet,
	// and returns what is stored for every subject of recs afterwards.
	create(ctx context.Context, recs map[hash][]byte) (map[hash][]byte, error)
	// bury replaces the subject's record by the tombstone durably and
	// removes what it can of the old record's bytes.
	bury(ctx context.Context, h hash, tomb []byte) error
	close() error
}

// Options configure a Keyring.
type Options struct {
	// Audit, if set, receives an audit event per subject forgotten, in
	// AuditStream.
	Audit AuditAppender
	// CacheKeys bounds the unwrapped keys kept in memory (default
	// 100,000: about 10 MB).
	CacheKeys int
	// CacheTTL is how long a key is used from memory before the store is
	// asked again (default: for ever on a directory, which one process
	// owns; 5 s on PostgreSQL, where another process may forget it).
	CacheTTL time.Duration
	// Existing opens only a keyring that is already there, and refuses to
	// make a new, empty one: for tools that act on a keyring (a mistyped
	// path must not pass for a keyring with nothing to do).
	Existing bool
	// now is the clock (tests).
	now func() time.Time
}

// ErrNoKeyring is what opening with Options.Existing returns where no
// keyring is.
var ErrNoKeyring = errors.New("shred: no keyring there")

// Keyring holds a data key per subject, wrapped under a master key.
type Keyring struct {
	b       backend
	wrap    cipher.AEAD
	hashKey []byte
	opts    Options

	macs   sync.Pool  // of HMACs under hashKey: making one is most of a hash's cost
	wmu    sync.Mutex // one creation or forgetting at a time in this process
	closed atomic.Bool

	mu    sync.Mutex
	cache map[hash]cached
	gen   uint64 // counts Forget calls: see absorb
}

type cached struct {
	key     []byte // nil: forgotten
	version uint32
	until   time.Time
}

func newKeyring(ctx context.Context, b backend, master MasterKey, opts Options) (*Keyring, error) {
	if opts.CacheKeys <= 0 {
		opts.CacheKeys = 100_000
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	wk, ck := derive(master, "logbook shred: key wrapping"), derive(master, "logbook shred: master key check")
	k := &Keyring{b: b, wrap: newGCM(wk), hashKey: hashKey(master), opts: opts, cache: map[hash]cached{}}
	mac := hmac.New(sha256.New, ck)
	mac.Write([]byte("logbook shred keyring"))
	want := mac.Sum(nil)
	got, err := b.check(ctx, want)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(got, want) {
		return nil, ErrWrongMasterKey
	}
	return k, nil
}

// derive makes a key for one purpose from the master key (HKDF-SHA-256).
func derive(master MasterKey, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, master[:], nil, purpose, 32)
	if err != nil {
		panic(err) // only for lengths HKDF cannot give
	}
	return k
}

func hashKey(master MasterKey) []byte { return derive(master, "logbook shred: subject hash") }

func newGCM(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 32-byte key never fails
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return g
}

// SubjectHash is the keyed hash of a subject's id, in hex: what the audit
// event and the envelopes (its first 16 bytes) name the subject by.
func (k *Keyring) SubjectHash(subject string) string {
	h := k.hash(subject)
	return hex.EncodeToString(h[:])
}

func (k *Keyring) hash(subject string) hash {
	mac, _ := k.macs.Get().(gohash.Hash)
	if mac == nil {
		mac = hmac.New(sha256.New, k.hashKey)
	}
	mac.Reset()
	mac.Write([]byte(subject))
	var h hash
	mac.Sum(h[:0])
	k.macs.Put(mac)
	return h
}

// Close closes the key store; closing again does nothing.
func (k *Keyring) Close() error {
	if k.closed.Swap(true) {
		return nil
	}
	return k.b.close()
}

// lookup returns the subjects' keys from the cache or the store; absent
// from the answer: no record.
func (k *Keyring) lookup(ctx context.Context, hs []hash) (map[hash]cached, error) {
	now := k.opts.now()
	out := make(map[hash]cached, len(hs))
	var miss []hash
	k.mu.Lock()
	gen := k.gen
	for _, h := range hs {
		if c, ok := k.cache[h]; ok && (c.until.IsZero() || now.Before(c.until)) {
			out[h] = c
		} else {
			miss = append(miss, h)
		}
	}
	k.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	recs, err := k.b.get(ctx, miss)
	if err != nil {
		return nil, err
	}
	if err := k.absorb(recs, out, gen); err != nil {
		return nil, err
	}
	return out, nil
}

// absorb unwraps stored records into out, and into the cache unless a
// subject was forgotten since gen was read: records read before a Forget
// must not put a destroyed key back in the cache.
func (k *Keyring) absorb(recs map[hash][]byte, out map[hash]cached, gen uint64) error {
	var until time.Time
	if k.opts.CacheTTL > 0 {
		until = k.opts.now().Add(k.opts.CacheTTL)
	}
	fresh := make(map[hash]cached, len(recs))
	for h, b := range recs {
		r, err := decodeRecord(b)
		if err != nil {
			return err
		}
		c := cached{version: r.version, until: until}
		if r.kind == recKey {
			if c.key, err = k.unwrap(h, r); err != nil {
				return err
			}
		}
		fresh[h] = c
		out[h] = c
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		return nil
	}
	for h, c := range fresh {
		if len(k.cache) >= k.opts.CacheKeys {
			for old := range k.cache { // evict one at random
				delete(k.cache, old)
				break
			}
		}
		k.cache[h] = c
	}
	return nil
}

func wrapAD(h hash, version uint32) []byte {
	ad := append([]byte("logbook shred data key\x00"), h[:]...)
	return binary.BigEndian.AppendUint32(ad, version)
}

func (k *Keyring) unwrap(h hash, r record) ([]byte, error) {
	key, err := k.wrap.Open(nil, r.wrapped[:nonceLen], r.wrapped[nonceLen:], wrapAD(h, r.version))
	if err != nil {
		return nil, fmt.Errorf("%w: a data key does not unwrap", ErrWrongMasterKey)
	}
	return key, nil
}

// Prepare makes sure each subject has a key, creating the missing ones
// in one durable write: a bulk load calls it before sealing, rather than
// paying a durable write per new subject. Forgotten subjects are left
// forgotten (Seal refuses them).
func (k *Keyring) Prepare(ctx context.Context, subjects []string) error {
	hs := make([]hash, len(subjects))
	for i, s := range subjects {
		hs[i] = k.hash(s)
	}
	_, err := k.keys(ctx, hs)
	return err
}

// keys returns the subjects' keys, creating the missing ones.
func (k *Keyring) keys(ctx context.Context, hs []hash) (map[hash]cached, error) {
	got, err := k.lookup(ctx, hs)
	if err != nil {
		return nil, err
	}
	if len(got) == len(dedup(hs)) {
		return got, nil
	}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	gen := k.gen // no Forget runs while wmu is held
	k.mu.Unlock()
	recs := map[hash][]byte{}
	for _, h := range hs {
		if _, ok := got[h]; ok {
			continue
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		wrapped := make([]byte, nonceLen, nonceLen+48)
		_, _ = rand.Read(wrapped)
		wrapped = k.wrap.Seal(wrapped, wrapped[:nonceLen], key, wrapAD(h, 1))
		recs[h] = record{kind: recKey, version: 1, wrapped: wrapped}.encode()
	}
	stored, err := k.b.create(ctx, recs)
	if err != nil {
		return nil, err
	}
	if err := k.absorb(stored, got, gen); err != nil {
		return nil, err
	}
	return got, nil
}

func dedup(hs []hash) map[hash]struct{} {
	m := make(map[hash]struct{}, len(hs))
	for _, h := range hs {
		m[h] = struct{}{}
	}
	return m
}

func dataAD(header []byte, subject, field string) []byte {
	ad := make([]byte, 0, len(header)+len(subject)+len(field)+20)
	ad = append(ad, header...)
	ad = binary.AppendUvarint(ad, uint64(len(subject)))
	ad = append(ad, subject...)
	ad = binary.AppendUvarint(ad, uint64(len(field)))
	return append(ad, field...)
}

// Seal encrypts plaintext, one field of subject, under the subject's key
// (made, durably, if the subject has none). A forgotten subject is
// ErrForgotten: nothing new is sealed for it.
func (k *Keyring) Seal(ctx context.Context, subject, field string, plaintext []byte) ([]byte, error) {
	h := k.hash(subject)
	keys, err := k.keys(ctx, []hash{h})
	if err != nil {
		return nil, err
	}
	c := keys[h]
	if c.key == nil {
		return nil, ErrForgotten
	}
	out := make([]byte, headerLen+nonceLen, overheadLen+len(plaintext))
	out[0], out[1] = magic, format1
	copy(out[2:], h[:tagLen])
	binary.BigEndian.PutUint32(out[2+tagLen:], c.version)
	_, _ = rand.Read(out[headerLen:])
	return newGCM(c.key).Seal(out, out[headerLen:headerLen+nonceLen], plaintext, dataAD(out[:headerLen], subject, field)), nil
}

// Open decrypts an envelope Seal made for the same subject and field.
// ErrForgotten: the subject was forgotten; ErrTampered: the envelope was
// altered or belongs to another subject or field; ErrNotSealed: it is no
// envelope.
func (k *Keyring) Open(ctx context.Context, subject, field string, envelope []byte) ([]byte, error) {
	e, err := ParseEnvelope(envelope)
	if err != nil {
		return nil, err
	}
	if h := k.hash(subject); !hmac.Equal(e.SubjectTag[:], h[:tagLen]) {
		return nil, fmt.Errorf("%w: sealed for another subject", ErrTampered)
	}
	sk, err := k.Subject(ctx, subject)
	if err != nil {
		return nil, err
	}
	return sk.Open(field, envelope)
}

// SealString is Seal of a string, in text form: StringPrefix and the
// envelope in unpadded URL-safe base64, for JSON fields.
func (k *Keyring) SealString(ctx context.Context, subject, field, s string) (string, error) {
	b, err := k.Seal(ctx, subject, field, []byte(s))
	if err != nil {
		return "", err
	}
	return StringPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// OpenString is Open of SealString's text form.
func (k *Keyring) OpenString(ctx context.Context, subject, field, s string) (string, error) {
	if len(s) < len(StringPrefix) || s[:len(StringPrefix)] != StringPrefix {
		return "", ErrNotSealed
	}
	b, err := base64.RawURLEncoding.DecodeString(s[len(StringPrefix):])
	if err != nil {
		return "", ErrNotSealed
	}
	pt, err := k.Open(ctx, subject, field, b)
	return string(pt), err
}

// SubjectKey is one subject's key, ready to open (and seal) several
// fields of theirs for the price of one lookup.
type SubjectKey struct {
	subject string
	tag     [tagLen]byte
	version uint32
	aead    cipher.AEAD
}

// Subject returns the subject's key for opening its fields: ErrForgotten
// when it was forgotten, ErrNoKey when it never had one.
func (k *Keyring) Subject(ctx context.Context, subject string) (*SubjectKey, error) {
	h := k.hash(subject)
	now := k.opts.now()
	k.mu.Lock()
	c, ok := k.cache[h]
	k.mu.Unlock()
	if !ok || (!c.until.IsZero() && !now.Before(c.until)) {
		keys, err := k.lookup(ctx, []hash{h})
		if err != nil {
			return nil, err
		}
		if c, ok = keys[h]; !ok {
			return nil, ErrNoKey
		}
	}
	if c.key == nil {
		return nil, ErrForgotten
	}
	sk := &SubjectKey{subject: subject, version: c.version, aead: newGCM(c.key)}
	copy(sk.tag[:], h[:tagLen])
	return sk, nil
}

// Open is Keyring.Open with the subject's key in hand.
func (sk *SubjectKey) Open(field string, envelope []byte) ([]byte, error) {
	e, err := ParseEnvelope(envelope)
	switch {
	case err != nil:
		return nil, err
	case e.SubjectTag != sk.tag:
		return nil, fmt.Errorf("%w: sealed for another subject", ErrTampered)
	case e.KeyVersion != sk.version:
		return nil, fmt.Errorf("%w: key version %d, the subject's is %d", ErrTampered, e.KeyVersion, sk.version)
	}
	body := envelope[headerLen:]
	pt, err := sk.aead.Open(nil, body[:nonceLen], body[nonceLen:], dataAD(envelope[:headerLen], sk.subject, field))
	if err != nil {
		return nil, ErrTampered
	}
	return pt, nil
}

// Forgotten reports whether the subject was forgotten.
func (k *Keyring) Forgotten(ctx context.Context, subject string) (bool, error) {
	h := k.hash(subject)
	keys, err := k.lookup(ctx, []hash{h})
	if err != nil {
		return false, err
	}
	c, ok := keys[h]
	return ok && c.key == nil, nil
}

// Forget destroys the subject's key, durably, and leaves a tombstone in
// its place, so that its sealed fields can never be read again and
// nothing new is sealed for it; then appends the audit event (Options.
// Audit) saying by whom. Forgetting a forgotten subject, or one that
// never had a key, is not an error: the tombstone is (still) there and
// the audit event is appended once per subject (its id is derived from
// the subject's hash, so a retry after a failed append is recognised).
func (k *Keyring) Forget(ctx context.Context, subject, by string) (Forgotten, error) {
	h := k.hash(subject)
	k.wmu.Lock()
	recs, err := k.b.get(ctx, []hash{h})
	if err != nil {
		k.wmu.Unlock()
		return Forgotten{}, err
	}
	now := k.opts.now().UTC()
	f := Forgotten{SubjectHash: hex.EncodeToString(h[:]), At: now, By: by}
	prev, had := recs[h]
	var r record
	if had {
		if r, err = decodeRecord(prev); err != nil {
			k.wmu.Unlock()
			return Forgotten{}, err
		}
	}
	switch {
	case had && r.kind == recTombstone:
		f.KeyVersion, f.At = r.version, time.Unix(0, r.at).UTC()
	default:
		f.KeyVersion = r.version // 0 when there was no key
		tomb := record{kind: recTombstone, version: r.version, at: now.UnixNano()}
		if err := k.b.bury(ctx, h, tomb.encode()); err != nil {
			k.wmu.Unlock()
			return Forgotten{}, err
		}
	}
	k.mu.Lock()
	k.gen++
	k.cache[h] = cached{version: f.KeyVersion}
	k.mu.Unlock()
	k.wmu.Unlock()
	if k.opts.Audit != nil {
		pos, err := appendAudit(ctx, k.opts.Audit, f)
		if err != nil {
			return f, fmt.Errorf("shred: the key is destroyed, but its audit event was not appended (forget again to append it): %w", err)
		}
		f.Position = pos
	}
	return f, nil
}

// bury is Forget of a subject known by its hash, without the audit
// event: it replaces the record by a tombstone (dated at) unless it is
// one already, and reports whether a live key was destroyed.
func (k *Keyring) bury(ctx context.Context, h hash, at time.Time) (bool, error) {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	recs, err := k.b.get(ctx, []hash{h})
	if err != nil {
		return false, err
	}
	var r record
	if prev, ok := recs[h]; ok {
		if r, err = decodeRecord(prev); err != nil {
			return false, err
		}
	}
	if r.kind != recTombstone {
		tomb := record{kind: recTombstone, version: r.version, at: at.UnixNano()}
		if err := k.b.bury(ctx, h, tomb.encode()); err != nil {
			return false, err
		}
	}
	k.mu.Lock()
	k.gen++
	k.cache[h] = cached{version: r.version}
	k.mu.Unlock()
	return r.kind == recKey, nil
}
