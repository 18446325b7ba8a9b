// Package userscdc keeps the notify service's view of its users — name,
// language, e-mail address, device tokens, per type and channel settings,
// global opt-out — by change data capture of the users' own PostgreSQL
// database (the monolith's), through logical replication with pgoutput.
//
// A [Follower] takes a consistent snapshot of the source tables (the one
// a new replication slot exports), then applies the slot's stream one
// source transaction at a time to a [View], a Pebble database of its own,
// each transaction's effect and its commit position in one atomic batch.
// It confirms a position to PostgreSQL only once the batch that reached
// it is on disk, so the slot keeps everything not yet applied durably: a
// restart resumes from the stored position, skips what it had applied,
// and loses nothing. [View.Users] is the lookup the preference check and
// the build read ([notify.Users]); [View.WaitFor] waits until the view
// reflects the source up to a position (read-your-writes, lag).
//
// [Source] creates the source tables and writes to them: the tests, and
// the benchmark, play the monolith with it.
package userscdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pglogrepl"

	"github.com/logbook/logbook/engine/pebblekit"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/services/notify"
)

// LSN is a position in the source database's write-ahead log.
type LSN = pglogrepl.LSN

// The view's keys. Meta keys start with 0x00; each source table has a
// prefix byte, and ids are big-endian with the sign bit flipped, so that
// keys sort as the ids do.
//
//	u id                  → user: name, language, e-mail, opt-out
//	s id type 0x00 chan   → one setting: 1 on, 0 off
//	d id devid            → a device's token
//	i devid               → the device's user id (deletes carry only devid)
//	k id                  → the user's club id (absent: no club)
//	c club id             → empty: the club's members, for to_club sends
var (
	formatKey   = []byte("\x00format")
	positionKey = []byte("\x00position")
	snapshotKey = []byte("\x00snapshot") // set while a snapshot is being copied: the slot's name
	sealedKey   = []byte("\x00sealed")   // "1": personal fields are sealed under the users' keys
	viewFormat  = "logbook-userscdc-2"   // 2: club membership
)

const (
	prefixUser    = 'u'
	prefixSetting = 's'
	prefixDevice  = 'd'
	prefixDevIdx  = 'i'
	prefixClubOf  = 'k'
	prefixMember  = 'c'
)

func memberKey(club, userID int64) []byte {
	return binary.BigEndian.AppendUint64(idKey(prefixMember, club), uint64(userID)^(1<<63))
}

func idKey(prefix byte, id int64) []byte {
	k := make([]byte, 9, 32)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], uint64(id)^(1<<63))
	return k
}

func keyID(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63)) }

func settingKey(id int64, typ string, c notify.Channel) []byte {
	k := append(idKey(prefixSetting, id), typ...)
	k = append(k, 0)
	return append(k, c...)
}

func deviceKey(userID, devID int64) []byte {
	return binary.BigEndian.AppendUint64(idKey(prefixDevice, userID), uint64(devID)^(1<<63))
}

// userRow is a users row as the view keeps it. In a sealed view
// (ViewOptions.Keyring) Name and Email hold envelopes of the user's key
// (shred), Email empty when the source has none.
type userRow struct {
	Name, Language string
	Email          string // empty: NULL
	OptOut         bool
	// Forgotten: the user was forgotten; Name and Email are empty.
	Forgotten bool
}

// The flags byte of a users record.
const (
	flagOptOut    = 1
	flagForgotten = 2
)

func (u userRow) encode() []byte {
	b := make([]byte, 0, 16+len(u.Name)+len(u.Language)+len(u.Email))
	for _, s := range []string{u.Name, u.Language, u.Email} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var flags byte
	if u.OptOut {
		flags |= flagOptOut
	}
	if u.Forgotten {
		flags |= flagForgotten
	}
	return append(b, flags)
}

var errCorrupt = errors.New("userscdc: corrupt view record")

func decodeUser(b []byte) (userRow, error) {
	var u userRow
	var fields [3]string
	for i := range fields {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return u, errCorrupt
		}
		fields[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	if len(b) != 1 || b[0]&^(flagOptOut|flagForgotten) != 0 {
		return u, errCorrupt
	}
	u.Name, u.Language, u.Email = fields[0], fields[1], fields[2]
	u.OptOut, u.Forgotten = b[0]&flagOptOut != 0, b[0]&flagForgotten != 0
	return u, nil
}

// Subject is the data subject a user's personal fields are sealed under
// in a sealed view: forgetting it (shred.Keyring.Forget) makes them
// unreadable.
func Subject(userID int64) string { return "user/" + strconv.FormatInt(userID, 10) }

// The sealed fields' names (the additional data of their envelopes).
const (
	fieldName   = "name"
	fieldEmail  = "email"
	fieldDevice = "device_token"
)

// sealUser seals a row's personal fields under the user's key; a user
// forgotten is kept as forgotten, without them.
func (v *View) sealUser(ctx context.Context, id int64, u userRow) ([]byte, error) {
	if v.keys == nil || u.Forgotten {
		return u.encode(), nil
	}
	name, err := v.keys.Seal(ctx, Subject(id), fieldName, []byte(u.Name))
	if errors.Is(err, shred.ErrForgotten) {
		return userRow{Language: u.Language, OptOut: u.OptOut, Forgotten: true}.encode(), nil
	}
	if err != nil {
		return nil, err
	}
	u.Name = string(name)
	if u.Email != "" {
		email, err := v.keys.Seal(ctx, Subject(id), fieldEmail, []byte(u.Email))
		if errors.Is(err, shred.ErrForgotten) { // forgotten meanwhile
			return userRow{Language: u.Language, OptOut: u.OptOut, Forgotten: true}.encode(), nil
		}
		if err != nil {
			return nil, err
		}
		u.Email = string(email)
	}
	return u.encode(), nil
}

// openUser decodes a users record and opens its sealed fields: a user
// whose key was destroyed comes back Forgotten, without them. The
// user's key, when there is one, is returned for their device tokens.
func (v *View) openUser(ctx context.Context, id int64, raw []byte) (userRow, *shred.SubjectKey, error) {
	u, err := decodeUser(raw)
	if err != nil || v.keys == nil || u.Forgotten {
		return u, nil, err
	}
	forgotten := userRow{Language: u.Language, OptOut: u.OptOut, Forgotten: true}
	sk, err := v.keys.Subject(ctx, Subject(id))
	if errors.Is(err, shred.ErrForgotten) {
		return forgotten, nil, nil
	}
	if err != nil {
		return u, nil, fmt.Errorf("userscdc: user %d's key: %w", id, err)
	}
	name, err := sk.Open(fieldName, []byte(u.Name))
	if err != nil {
		return u, nil, fmt.Errorf("userscdc: user %d's name: %w", id, err)
	}
	u.Name = string(name)
	if u.Email != "" {
		email, err := sk.Open(fieldEmail, []byte(u.Email))
		if err != nil {
			return u, nil, fmt.Errorf("userscdc: user %d's e-mail: %w", id, err)
		}
		u.Email = string(email)
	}
	return u, sk, nil
}

// sealToken seals a device token under its user's key; nil: the user is
// forgotten, and the device is kept without its token.
func (v *View) sealToken(ctx context.Context, userID int64, token string) ([]byte, error) {
	if v.keys == nil {
		return []byte(token), nil
	}
	b, err := v.keys.Seal(ctx, Subject(userID), fieldDevice, []byte(token))
	if errors.Is(err, shred.ErrForgotten) {
		return nil, nil
	}
	return b, err
}

// openToken opens a stored device token; "" when its user is forgotten.
// sk, if not nil, is the user's key.
func (v *View) openToken(ctx context.Context, userID int64, sk *shred.SubjectKey, raw []byte) (string, error) {
	if v.keys == nil {
		return string(raw), nil
	}
	if len(raw) == 0 {
		return "", nil
	}
	if sk == nil {
		var err error
		sk, err = v.keys.Subject(ctx, Subject(userID))
		if errors.Is(err, shred.ErrForgotten) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("userscdc: user %d's key: %w", userID, err)
		}
	}
	b, err := sk.Open(fieldDevice, raw)
	if err != nil {
		return "", fmt.Errorf("userscdc: user %d's device token: %w", userID, err)
	}
	return string(b), nil
}

// redact marks the forgotten among users read from the source's
// snapshot (which still holds them): nothing of theirs is answered.
func (v *View) redact(ctx context.Context, us map[int64]*notify.User) error {
	if v.keys == nil {
		return nil
	}
	for id, u := range us {
		gone, err := v.keys.Forgotten(ctx, Subject(id))
		if err != nil {
			return err
		}
		if gone {
			*u = notify.User{ID: id, Language: u.Language, OptOut: u.OptOut, Disabled: u.Disabled, Forgotten: true}
		}
	}
	return nil
}

// ViewOptions configure a View.
type ViewOptions struct {
	// Logger receives Pebble's errors (default slog.Default()).
	Logger *slog.Logger
	// CacheBytes sizes the block cache (default 256 MiB), enough to hold
	// the index and data blocks of a view of a million users; with
	// Pebble's default 8 MiB the lookups of a million-recipient send read
	// and decompressed the same blocks again and again, which was most of
	// the send's CPU (docs/benchmarks.md, "Figures behind choices in the
	// code").
	CacheBytes int64
	// Keyring, if set, seals each user's personal fields — name, e-mail
	// address, device tokens — under the user's own key (Subject) before
	// they are written, and opens them on reading; forgetting the user
	// in the keyring leaves the view unable to read them, and the user
	// answered as Forgotten. A view is sealed or not from its creation:
	// opening it the other way is an error (remove it, and it is
	// snapshotted again).
	Keyring *shred.Keyring
}

// View is the notify service's copy of the users' data: a Pebble database
// of its own that a Follower writes and any number of readers read.
type View struct {
	db   *pebble.DB
	keys *shred.Keyring // nil: personal fields in clear

	mu      sync.Mutex
	pos     LSN           // the source position the view reflects
	changed chan struct{} // closed and replaced when pos moves or err is set
	err     error         // why the follower stopped, for waiters
	closed  bool
	busy    bool // a follower writes the view
	// reader answers the reads while a snapshot is copied in the
	// background (Config.ServeDuringCopy); incomplete: the rows are not
	// a whole snapshot yet (a copy runs, or was interrupted), so without
	// a reader the view cannot answer.
	reader     *snapshotReader
	incomplete bool
	// gen moves whenever what a read sees may change: a batch committed,
	// the reads switched to or from a snapshot. Clubs' answer is kept
	// for the gen it was counted at.
	gen uint64

	clubsMu  sync.Mutex // one count at a time; who waits takes its answer
	clubsGen uint64
	clubsOK  bool
	clubs    []Club
}

// changedData notes that what reads see may have changed (v.mu held).
func (v *View) changedData() { v.gen++ }

// claim marks the view as written by a follower, clearing the previous
// follower's error; it fails if another follower runs.
func (v *View) claim() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.closed:
		return fmt.Errorf("userscdc: follow a closed view: %w", pebble.ErrClosed)
	case v.busy:
		return errors.New("userscdc: the view already has a follower")
	}
	v.busy, v.err = true, nil
	return nil
}

func (v *View) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.busy = false
}

// OpenView opens (creating if needed) the view database in dir.
func OpenView(dir string, opts ViewOptions) (*View, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 256 << 20
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	popts := &pebble.Options{
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebblekit.Logger(opts.Logger, "users view"),
		// A snapshot writes a million users in 16 MiB batches, which
		// the default 4 MiB memtable flushed as tables of their own,
		// stalling writes on level 0 (docs/benchmarks.md, "Figures
		// behind choices in the code").
		MemTableSize:          64 << 20,
		L0CompactionThreshold: 4,
		L0StopWritesThreshold: 24,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("userscdc: open view %s: %w", dir, err)
	}
	v := &View{db: db, keys: opts.Keyring, changed: make(chan struct{})}
	if err := v.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("userscdc: open view %s: %w", dir, err)
	}
	return v, nil
}

func (v *View) load() error {
	if err := pebblekit.Claim(v.db, formatKey, viewFormat, "users view"); err != nil {
		return err
	}
	pos, err := readPosition(v.db)
	v.pos = pos
	if err != nil {
		return err
	}
	marker, err := v.snapshotting()
	v.incomplete = marker != ""
	if err != nil {
		return err
	}
	return v.claimSealing()
}

// claimSealing checks that the view is sealed if and only if it has a
// keyring, and records which on a new view.
func (v *View) claimSealing() error {
	want := "0"
	if v.keys != nil {
		want = "1"
	}
	got, closer, err := v.db.Get(sealedKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if v.pos != 0 || v.incomplete {
			got = []byte("0") // made before views could be sealed
			break
		}
		return v.db.Set(sealedKey, []byte(want), pebble.Sync)
	case err != nil:
		return err
	default:
		got = slices.Clone(got)
		_ = closer.Close()
	}
	switch {
	case string(got) == want:
		return nil
	case want == "1":
		return errors.New("the view keeps personal data in clear and a keyring was given: remove the view to have it snapshotted again, sealed")
	}
	return errors.New("the view's personal data is sealed and no keyring was given: give the master key")
}

func readPosition(r pebble.Reader) (LSN, error) {
	pos, err := pebblekit.ReadCheckpoint(r, positionKey)
	if errors.Is(err, pebblekit.ErrBadCheckpoint) {
		return 0, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return LSN(pos), err
}

// snapshotting reports the slot whose snapshot was being copied when the
// view was last closed or killed, if one was.
func (v *View) snapshotting() (string, error) {
	b, closer, err := v.db.Get(snapshotKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer closer.Close()
	return string(b), nil
}

// Position is the source position the view reflects: every transaction
// the source committed before it is applied, none after it. 0: the view
// has no snapshot yet.
func (v *View) Position() LSN {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pos
}

// WaitFor returns once the view reflects the source up to lsn (for
// example the source's pg_current_wal_insert_lsn() after a commit), or
// with the follower's error if it stopped, or with ctx's.
func (v *View) WaitFor(ctx context.Context, lsn LSN) error {
	for {
		v.mu.Lock()
		pos, err, ch, closed := v.pos, v.err, v.changed, v.closed
		v.mu.Unlock()
		switch {
		case pos >= lsn:
			return nil
		case err != nil:
			return err
		case closed:
			return fmt.Errorf("userscdc: wait for %s: %w", lsn, pebble.ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("userscdc: wait for %s (view at %s): %w", lsn, pos, ctx.Err())
		}
	}
}

// advance moves the position forward (a keepalive past everything the
// view has applied) and wakes waiters.
func (v *View) advance(lsn LSN) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if lsn > v.pos {
		v.pos = lsn
		close(v.changed)
		v.changed = make(chan struct{})
	}
}

// reset sets the position back to none (a new snapshot begins): until
// the copy commits, or a reader of the snapshot is installed, the view
// does not answer.
func (v *View) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pos = 0
	v.incomplete = true
	v.changedData()
}

// hydrate makes r answer the view's reads while the snapshot of the
// slot whose consistent point is at is copied: reads then see the
// source at that point, so that is the view's position meanwhile.
func (v *View) hydrate(r *snapshotReader, at LSN) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reader = r
	v.pos = at
	v.changedData()
	close(v.changed)
	v.changed = make(chan struct{})
}

// copied switches the reads to the view's rows, which now hold the
// whole snapshot, and closes the snapshot's reader (waiting for its
// reads in flight) if there was one.
func (v *View) copied() {
	v.mu.Lock()
	r := v.reader
	v.reader, v.incomplete = nil, false
	v.changedData()
	v.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// copyFailed closes the snapshot's reader: the view cannot answer until
// a new snapshot is taken.
func (v *View) copyFailed() {
	v.mu.Lock()
	r := v.reader
	v.reader, v.pos = nil, 0
	v.changedData()
	v.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// ErrIncomplete is a read of a view whose snapshot copy has not
// completed (and is not being served from the source's snapshot).
var ErrIncomplete = errors.New("userscdc: the view's snapshot is not complete")

// route returns the reader of the source's snapshot that answers reads
// while the copy runs, nil when the view's rows do.
func (v *View) route() (*snapshotReader, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.reader != nil:
		return v.reader, nil
	case v.closed:
		return nil, pebble.ErrClosed
	case v.incomplete:
		return nil, ErrIncomplete
	}
	return nil, nil
}

// fromSnapshot runs read on the snapshot reader while there is one; ok
// false: the view's rows answer.
func fromSnapshot[T any](v *View, read func(r *snapshotReader) (T, error)) (out T, ok bool, err error) {
	for {
		r, err := v.route()
		if err != nil || r == nil {
			return out, err != nil, err
		}
		out, err = read(r)
		if !errors.Is(err, errReaderClosed) {
			return out, true, err
		}
		// The copy committed (or failed) meanwhile: look again.
	}
}

// Ready reports whether the view can answer reads, and from where:
// "snapshot" while the snapshot is copied and reads are answered from
// the source at the slot's consistent point, "view" from its own rows.
// It fails when the view is closed, its snapshot is incomplete, or its
// follower stopped.
func (v *View) Ready() (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.closed:
		return "", pebble.ErrClosed
	case v.err != nil:
		return "", v.err
	case v.reader != nil:
		return "snapshot", nil
	case v.incomplete:
		return "", ErrIncomplete
	}
	return "view", nil
}

// fail records why the view stops moving; waiters get err.
func (v *View) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.err = err
	close(v.changed)
	v.changed = make(chan struct{})
}

// Users implements notify.Users: the users among ids the view knows, as
// of one consistent snapshot. Settings switched on are left out of
// Disabled, as are the ones the user never set.
//
// While a snapshot is copied in the background, the source's snapshot
// answers (Config.ServeDuringCopy).
func (v *View) Users(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	if us, ok, err := fromSnapshot(v, func(r *snapshotReader) (map[int64]*notify.User, error) { return r.users(ctx, ids) }); ok {
		if err == nil {
			err = v.redact(ctx, us)
		}
		return us, err
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	snap := v.db.NewSnapshot()
	defer snap.Close()
	return v.readUsers(ctx, snap, sorted)
}

// All returns every user in the view (tests, and checks of a benchmark).
func (v *View) All(ctx context.Context) (map[int64]*notify.User, error) {
	if us, ok, err := fromSnapshot(v, func(r *snapshotReader) (map[int64]*notify.User, error) { return r.all(ctx) }); ok {
		if err == nil {
			err = v.redact(ctx, us)
		}
		return us, err
	}
	snap := v.db.NewSnapshot()
	defer snap.Close()
	iter, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixUser}, UpperBound: []byte{prefixUser + 1}})
	if err != nil {
		return nil, err
	}
	var ids []int64
	for ok := iter.First(); ok; ok = iter.Next() {
		ids = append(ids, keyID(iter.Key()))
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	return v.readUsers(ctx, snap, ids)
}

// Members returns the ids of the club's members, ascending; more than
// max (> 0) members is an error.
func (v *View) Members(ctx context.Context, club int64, max int) ([]int64, error) {
	if ids, ok, err := fromSnapshot(v, func(r *snapshotReader) ([]int64, error) { return r.members(ctx, club, max) }); ok {
		return ids, err
	}
	p := idKey(prefixMember, club)
	iter, err := v.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: idKey(prefixMember, club+1)})
	if err != nil {
		return nil, err
	}
	var ids []int64
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		if len(k) != 17 {
			continue
		}
		if max > 0 && len(ids) == max {
			_ = iter.Close()
			return nil, fmt.Errorf("%w: club %d has more than %d members", ErrTooManyMembers, club, max)
		}
		if len(ids)%65536 == 0 {
			if err := ctx.Err(); err != nil {
				_ = iter.Close()
				return nil, err
			}
		}
		ids = append(ids, int64(binary.BigEndian.Uint64(k[9:])^(1<<63)))
	}
	return ids, iter.Close()
}

// ErrTooManyMembers is a club larger than Members was allowed to return.
var ErrTooManyMembers = errors.New("userscdc: too many members")

// Club is one club of the view and how many members it has.
type Club struct {
	ID      int64 `json:"id"`
	Members int64 `json:"members"`
}

// testHookCountClubs, if set, is called each time Clubs counts the
// members of every club (in the view's rows or the source's snapshot).
var testHookCountClubs func()

// Clubs returns every club with members, by id. The count is kept
// until the view's data changes (a transaction applied, the reads
// switched to or from the source's snapshot): asking again meanwhile
// counts nothing, and while the snapshot is copied (reads answered by a
// GROUP BY over the source's table) the snapshot never changes.
func (v *View) Clubs(ctx context.Context) ([]Club, error) {
	v.mu.Lock()
	gen := v.gen
	v.mu.Unlock()
	v.clubsMu.Lock()
	defer v.clubsMu.Unlock()
	if v.clubsOK && v.clubsGen == gen {
		return slices.Clone(v.clubs), nil
	}
	out, err := v.countClubs(ctx)
	if err != nil {
		return nil, err
	}
	// Kept for the gen read before counting: a change committed while
	// counting moved gen on, and the next call counts again.
	v.clubs, v.clubsGen, v.clubsOK = out, gen, true
	return slices.Clone(out), nil
}

func (v *View) countClubs(ctx context.Context) ([]Club, error) {
	if testHookCountClubs != nil {
		testHookCountClubs()
	}
	if cs, ok, err := fromSnapshot(v, func(r *snapshotReader) ([]Club, error) { return r.clubs(ctx) }); ok {
		return cs, err
	}
	iter, err := v.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMember}, UpperBound: []byte{prefixMember + 1}})
	if err != nil {
		return nil, err
	}
	var out []Club
	n := 0
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		if len(k) != 17 {
			continue
		}
		if n++; n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				_ = iter.Close()
				return nil, err
			}
		}
		id := keyID(k)
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, Club{ID: id})
		}
		out[len(out)-1].Members++
	}
	return out, iter.Close()
}

// readUsers reads the users of sorted ids: one pass per table, each a
// sequence of ascending seeks.
func (v *View) readUsers(ctx context.Context, r pebble.Reader, ids []int64) (map[int64]*notify.User, error) {
	out := make(map[int64]*notify.User, len(ids))
	var keys map[int64]*shred.SubjectKey // for the device tokens
	if v.keys != nil {
		keys = make(map[int64]*shred.SubjectKey, len(ids))
	}
	err := scan(r, prefixUser, ids, func(id int64, k, val []byte) error {
		if len(k) != 9 {
			return nil
		}
		row, sk, err := v.openUser(ctx, id, val)
		if err != nil {
			return err
		}
		if sk != nil {
			keys[id] = sk
		}
		out[id] = &notify.User{ID: id, Name: row.Name, Language: row.Language, Email: row.Email, OptOut: row.OptOut, Forgotten: row.Forgotten}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = scan(r, prefixSetting, ids, func(id int64, k, val []byte) error {
		u := out[id]
		if u == nil || len(val) != 1 || val[0] == 1 {
			return nil // a setting of an unknown user, or switched on
		}
		typ, c, ok := splitSetting(k[9:])
		if !ok {
			return errCorrupt
		}
		if u.Disabled == nil {
			u.Disabled = map[notify.Setting]bool{}
		}
		u.Disabled[notify.Setting{Type: typ, Channel: c}] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = scan(r, prefixDevice, ids, func(id int64, _, val []byte) error {
		u := out[id]
		if u == nil || u.Forgotten {
			return nil
		}
		token, err := v.openToken(ctx, id, keys[id], val)
		if err != nil || token == "" {
			return err
		}
		u.DeviceTokens = append(u.DeviceTokens, token)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func splitSetting(b []byte) (string, notify.Channel, bool) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), notify.Channel(b[i+1:]), true
		}
	}
	return "", "", false
}

// scan calls fn with every key (and value) under prefix+id, for each of
// the sorted ids.
func scan(r pebble.Reader, prefix byte, ids []int64, fn func(id int64, k, v []byte) error) error {
	if len(ids) == 0 {
		return nil
	}
	iter, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return err
	}
	for _, id := range ids {
		p := idKey(prefix, id)
		for ok := iter.SeekGE(p); ok && len(iter.Key()) >= 9 && string(iter.Key()[:9]) == string(p); ok = iter.Next() {
			val, err := iter.ValueAndErr()
			if err != nil {
				_ = iter.Close()
				return err
			}
			if err := fn(id, iter.Key(), val); err != nil {
				_ = iter.Close()
				return err
			}
		}
	}
	return iter.Close()
}

// Close closes the database. No Users call may be running or start after.
func (v *View) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	close(v.changed)
	v.changed = make(chan struct{})
	r := v.reader
	v.reader = nil
	err := v.db.Close()
	v.mu.Unlock()
	if r != nil {
		// Outside v.mu: closing waits for the snapshot's reads in
		// flight, and route and Ready must not wait for those.
		r.close()
	}
	return err
}
