package userscdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/pebblekit"
	"github.com/logbook/logbook/services/notify"
)

// col is one column of a decoded row: its kind as pgoutput sends it ('n'
// null, 'u' unchanged TOASTed value not sent, 't' text) and its text.
type col struct {
	kind byte
	val  string
}

// row is a decoded tuple by column name. A key-only tuple (a delete, or
// the old key of an update that changed it) has its other columns null.
type row map[string]col

func (r row) int64(name string) (int64, error) {
	c, ok := r[name]
	if !ok || c.kind != 't' {
		return 0, fmt.Errorf("userscdc: column %s: no value (kind %q)", name, c.kind)
	}
	n, err := strconv.ParseInt(c.val, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("userscdc: column %s: %w", name, err)
	}
	return n, nil
}

func (r row) text(name string) (string, error) {
	c, ok := r[name]
	if !ok || c.kind != 't' {
		return "", fmt.Errorf("userscdc: column %s: no value (kind %q)", name, c.kind)
	}
	return c.val, nil
}

// batch is one atomic write to the view: a source transaction's effects
// (or a part of a snapshot) and, at commit, the position it reaches.
type batch struct {
	v *View
	b *pebble.Batch // indexed: reads see the batch's own writes
}

func (v *View) newBatch() *batch { return &batch{v: v, b: v.db.NewIndexedBatch()} }

func (b *batch) size() int { return b.b.Len() }

// commit writes the batch; a non-zero end becomes the view's position in
// the same write. The batch is closed.
func (b *batch) commit(end LSN, sync bool) error {
	defer b.b.Close()
	if end != 0 {
		if err := b.b.Set(positionKey, pebblekit.AppendCheckpoint(nil, uint64(end)), nil); err != nil {
			return err
		}
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := b.b.Commit(opts); err != nil {
		return fmt.Errorf("userscdc: commit view batch: %w", err)
	}
	b.v.mu.Lock()
	b.v.changedData()
	b.v.mu.Unlock()
	if end != 0 {
		b.v.advance(end)
	}
	return nil
}

func (b *batch) close() { _ = b.b.Close() }

func (b *batch) get(k []byte) ([]byte, bool, error) {
	v, closer, err := b.b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// Source tables, as the follower knows them.
const (
	tableUsers    = "users"
	tableSettings = "user_settings"
	tableDevices  = "user_devices"
)

// upsert applies an insert (old nil) or an update (old: the old key when
// the update changed it) of a row of table.
func (b *batch) upsert(table string, old, nw row) error {
	switch table {
	case tableUsers:
		return b.upsertUser(old, nw)
	case tableSettings:
		return b.upsertSetting(old, nw)
	case tableDevices:
		return b.upsertDevice(old, nw)
	}
	return nil
}

func (b *batch) delete(table string, key row) error {
	switch table {
	case tableUsers:
		id, err := key.int64("id")
		if err != nil {
			return err
		}
		if err := b.leaveClub(id); err != nil {
			return err
		}
		return b.b.Delete(idKey(prefixUser, id), nil)
	case tableSettings:
		k, err := settingKeyOf(key)
		if err != nil {
			return err
		}
		return b.b.Delete(k, nil)
	case tableDevices:
		id, err := key.int64("id")
		if err != nil {
			return err
		}
		return b.deleteDevice(id)
	}
	return nil
}

// truncate empties a table's part of the view.
func (b *batch) truncate(table string) error {
	var prefixes []byte
	switch table {
	case tableUsers:
		prefixes = []byte{prefixUser, prefixClubOf, prefixMember}
	case tableSettings:
		prefixes = []byte{prefixSetting}
	case tableDevices:
		prefixes = []byte{prefixDevice, prefixDevIdx}
	}
	for _, p := range prefixes {
		if err := b.b.DeleteRange([]byte{p}, []byte{p + 1}, nil); err != nil {
			return err
		}
	}
	return nil
}

// errToast says an update left a column unchanged and TOASTed (not sent)
// but the view has no earlier value for it: the view is not a copy of the
// source, and continuing would make it worse.
var errToast = errors.New("userscdc: an update left a TOASTed column unchanged, but the view has no row to take it from")

func (b *batch) upsertUser(old, nw row) error {
	id, err := nw.int64("id")
	if err != nil {
		return err
	}
	prevID := id
	if old != nil {
		if prevID, err = old.int64("id"); err != nil {
			return err
		}
	}
	var prev *userRow
	load := func() (*userRow, error) {
		if prev != nil {
			return prev, nil
		}
		raw, ok, err := b.get(idKey(prefixUser, prevID))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w (users %d)", errToast, prevID)
		}
		r, _, err := b.v.openUser(context.Background(), prevID, raw)
		if err != nil {
			return nil, err
		}
		prev = &r
		return prev, nil
	}
	field := func(name string, from func(*userRow) string) (string, error) {
		c := nw[name]
		switch c.kind {
		case 'u':
			p, err := load()
			if err != nil {
				return "", err
			}
			return from(p), nil
		case 't':
			return c.val, nil
		}
		return "", nil // NULL
	}
	var u userRow
	if u.Name, err = field("name", func(r *userRow) string { return r.Name }); err != nil {
		return err
	}
	if u.Language, err = field("language", func(r *userRow) string { return r.Language }); err != nil {
		return err
	}
	if u.Email, err = field("email", func(r *userRow) string { return r.Email }); err != nil {
		return err
	}
	u.OptOut = nw["opt_out"].kind == 't' && nw["opt_out"].val == "t"
	// The club: a bigint is never TOASTed, but an unchanged-TOAST marker
	// keeps the club the view has.
	club, hasClub := int64(0), false
	switch c := nw["club_id"]; c.kind {
	case 't':
		if club, err = nw.int64("club_id"); err != nil {
			return err
		}
		hasClub = true
	case 'u':
		if club, hasClub, err = b.clubOf(prevID); err != nil {
			return err
		}
	}
	if err := b.leaveClub(prevID); err != nil {
		return err
	}
	if hasClub {
		if err := b.b.Set(idKey(prefixClubOf, id), binary.BigEndian.AppendUint64(nil, uint64(club)), nil); err != nil {
			return err
		}
		if err := b.b.Set(memberKey(club, id), nil, nil); err != nil {
			return err
		}
	}
	if prevID != id {
		if err := b.b.Delete(idKey(prefixUser, prevID), nil); err != nil {
			return err
		}
	}
	rec, err := b.v.sealUser(context.Background(), id, u)
	if err != nil {
		return err
	}
	return b.b.Set(idKey(prefixUser, id), rec, nil)
}

// clubOf reads the club the view has for a user.
func (b *batch) clubOf(id int64) (int64, bool, error) { return b.getID(prefixClubOf, id) }

// getID reads the id stored under id in one of the view's id-to-id
// indexes (a user's club, a device's user).
func (b *batch) getID(prefix byte, id int64) (int64, bool, error) {
	raw, ok, err := b.get(idKey(prefix, id))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(raw) != 8 {
		return 0, false, errCorrupt
	}
	return int64(binary.BigEndian.Uint64(raw)), true, nil
}

// leaveClub removes a user's membership, if the view has one.
func (b *batch) leaveClub(id int64) error {
	club, ok, err := b.clubOf(id)
	if err != nil || !ok {
		return err
	}
	if err := b.b.Delete(memberKey(club, id), nil); err != nil {
		return err
	}
	return b.b.Delete(idKey(prefixClubOf, id), nil)
}

func settingKeyOf(r row) ([]byte, error) {
	id, err := r.int64("user_id")
	if err != nil {
		return nil, err
	}
	typ, err := r.text("type")
	if err != nil {
		return nil, err
	}
	c, err := r.text("channel")
	if err != nil {
		return nil, err
	}
	return settingKey(id, typ, notify.Channel(c)), nil
}

func (b *batch) upsertSetting(old, nw row) error {
	k, err := settingKeyOf(nw)
	if err != nil {
		return err
	}
	if old != nil {
		ok, err := settingKeyOf(old)
		if err != nil {
			return err
		}
		if err := b.b.Delete(ok, nil); err != nil {
			return err
		}
	}
	on := byte(0)
	if nw["enabled"].val == "t" {
		on = 1
	}
	return b.b.Set(k, []byte{on}, nil)
}

func (b *batch) upsertDevice(old, nw row) error {
	id, err := nw.int64("id")
	if err != nil {
		return err
	}
	userID, err := nw.int64("user_id")
	if err != nil {
		return err
	}
	prevID := id
	if old != nil {
		if prevID, err = old.int64("id"); err != nil {
			return err
		}
	}
	var token string
	switch c := nw["token"]; c.kind {
	case 't':
		token = c.val
	case 'u':
		prevUser, ok, err := b.deviceUser(prevID)
		if err != nil {
			return err
		}
		var raw []byte
		if ok {
			raw, ok, err = b.get(deviceKey(prevUser, prevID))
			if err != nil {
				return err
			}
		}
		if !ok {
			return fmt.Errorf("%w (user_devices %d)", errToast, prevID)
		}
		if token, err = b.v.openToken(context.Background(), prevUser, nil, raw); err != nil {
			return err
		}
	}
	if err := b.deleteDevice(prevID); err != nil {
		return err
	}
	if prevID != id {
		if err := b.deleteDevice(id); err != nil {
			return err
		}
	}
	sealed, err := b.v.sealToken(context.Background(), userID, token)
	if err != nil {
		return err
	}
	if err := b.b.Set(deviceKey(userID, id), sealed, nil); err != nil {
		return err
	}
	return b.b.Set(idKey(prefixDevIdx, id), binary.BigEndian.AppendUint64(nil, uint64(userID)), nil)
}

// deviceUser returns the user the view has device id under.
func (b *batch) deviceUser(id int64) (int64, bool, error) { return b.getID(prefixDevIdx, id) }

func (b *batch) deleteDevice(id int64) error {
	user, ok, err := b.deviceUser(id)
	if err != nil || !ok {
		return err
	}
	if err := b.b.Delete(deviceKey(user, id), nil); err != nil {
		return err
	}
	return b.b.Delete(idKey(prefixDevIdx, id), nil)
}
