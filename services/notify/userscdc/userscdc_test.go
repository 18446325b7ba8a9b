package userscdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
)

// env is one test's source: a fresh schema with the tables, and a
// publication and slot named after it, dropped when the test ends.
type env struct {
	url string
	src *Source
	cfg Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvAt(t, testenv.URL(t), testenv.Schema(t))
}

// newEnvAt is newEnv on the database at url, in schema.
func newEnvAt(t *testing.T, url, schema string) *env {
	t.Helper()
	ctx := context.Background()
	src, err := OpenSource(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{url: url, src: src, cfg: Config{URL: url, Schema: schema, Publication: schema + "_pub", Slot: schema + "_slot", StatusInterval: 50 * time.Millisecond}}
	t.Cleanup(func() {
		defer src.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			_, err := src.Pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // still active: its walsender is ending
		}
		if _, err := src.Pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+e.cfg.Publication); err != nil {
			t.Logf("drop publication: %v", err)
		}
	})
	return e
}

func openView(t *testing.T, dir string) *View {
	t.Helper()
	v, err := OpenView(dir, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func (e *env) start(t *testing.T, v *View) *Follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, v, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func (e *env) write(t *testing.T, fn func(w *Writer) error) LSN {
	t.Helper()
	lsn, err := e.src.Write(context.Background(), fn)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func wait(t *testing.T, v *View, lsn LSN) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := v.WaitFor(ctx, lsn); err != nil {
		t.Fatal(err)
	}
}

// same fails the test if the view is not the source's recomputation.
func (e *env) same(t *testing.T, v *View) {
	t.Helper()
	ctx := context.Background()
	want, err := e.src.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		var diffs []string
		for id, w := range want {
			if g := got[id]; !reflect.DeepEqual(g, w) {
				diffs = append(diffs, fmt.Sprintf("user %d: view %+v, source %+v", id, g, w))
			}
		}
		for id, g := range got {
			if want[id] == nil {
				diffs = append(diffs, fmt.Sprintf("user %d: view %+v, not in the source", id, g))
			}
		}
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("… %d more", len(diffs)-10))
		}
		t.Fatalf("view (%d users) differs from the source (%d users):\n%s", len(got), len(want), fmt.Sprint(diffs))
	}
}

func user(id int64, name string) *notify.User {
	return &notify.User{ID: id, Name: name, Language: "en", Email: fmt.Sprintf("u%d@example.org", id)}
}

func TestSnapshotThenStream(t *testing.T) {
	e := newEnv(t)
	for i := range int64(50) {
		e.write(t, func(w *Writer) error {
			if err := w.PutUser(user(i+1, fmt.Sprintf("User %d", i+1)), i%3); err != nil {
				return err
			}
			if i%2 == 0 {
				if _, err := w.AddDevice(i+1, fmt.Sprintf("tok-%d", i+1)); err != nil {
					return err
				}
			}
			if i%5 == 0 {
				return w.SetSetting(i+1, "like_update", notify.Push, false)
			}
			return nil
		})
	}
	v := openView(t, t.TempDir())
	e.start(t, v)
	if v.Position() == 0 {
		t.Fatal("no position after the snapshot")
	}
	e.same(t, v)

	lsn := e.write(t, func(w *Writer) error {
		if err := w.PutUser(user(100, "New"), 1); err != nil {
			return err
		}
		if _, err := w.AddDevice(100, "tok-100"); err != nil {
			return err
		}
		if err := w.SetSetting(100, "like_update", notify.Email, false); err != nil {
			return err
		}
		if err := w.DeleteUser(2); err != nil { // cascades to its settings and devices
			return err
		}
		u := user(3, "Renamed")
		u.OptOut = true
		return w.PutUser(u, 1)
	})
	wait(t, v, lsn)
	e.same(t, v)

	got, err := v.Users(context.Background(), []int64{100, 2, 3, 100, 999})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]*notify.User{
		100: {ID: 100, Name: "New", Language: "en", Email: "u100@example.org", DeviceTokens: []string{"tok-100"},
			Disabled: map[notify.Setting]bool{{Type: "like_update", Channel: notify.Email}: true}},
		3: {ID: 3, Name: "Renamed", Language: "en", Email: "u3@example.org", OptOut: true, DeviceTokens: []string{"tok-3"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Users: %+v %+v, want %+v %+v", got[100], got[3], want[100], want[3])
	}
	d := notify.Policy{}.Check(got[100], "like_update")
	if !slices.Equal(d.Channels, []notify.Channel{notify.Push}) {
		t.Fatalf("the check of user 100: %+v, want push only", d)
	}

	// The processor reads the view as its Users.
	p := notify.Processor{Templates: notify.Templates{"like_update": {"en": {Title: "Hi {name}", Body: "club {club}"}}}}
	var mu sync.Mutex // senders run concurrently
	var sent []notify.Message
	counts, err := p.Process(context.Background(), &notify.Request{ID: "r1", Type: "like_update", ClubID: 1, Sender: "s",
		Timestamp: time.Now(), ToUsers: []int64{100, 3, 999, 1}}, v, func(_ context.Context, b []notify.Message) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, b...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts.Refused[notify.RefusedOptOut] != 1 || counts.Refused[notify.RefusedUnknownUser] != 1 || counts.Built != 2 || counts.Delivered != 2 {
		t.Fatalf("counts %+v (sent %+v)", counts, sent)
	}
}

var _ notify.Users = (*View)(nil)

func randomText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Updates that change keys, TOASTed columns left unchanged, deletes under
// both replica identities, and truncation.
func TestKeysToastDeletes(t *testing.T) {
	testKeysToastDeletes(t, func(t *testing.T) *View { return openView(t, t.TempDir()) })
}

// TestKeysToastDeletesSealed: the same changes to a view that seals
// the users' personal fields; the unsent TOASTed values are opened from
// the view's row and sealed again (under another user's key, for the
// device that moves).
func TestKeysToastDeletesSealed(t *testing.T) {
	testKeysToastDeletes(t, func(t *testing.T) *View { v, _ := openSealedView(t, t.TempDir()); return v })
}

func testKeysToastDeletes(t *testing.T, open func(t *testing.T) *View) {
	e := newEnv(t)
	bigName := randomText(20_000) // incompressible: stored out of line
	bigToken := randomText(8_000)
	var dev1, dev2 int64
	e.write(t, func(w *Writer) error {
		u := user(1, bigName)
		if err := w.PutUser(u, 1); err != nil {
			return err
		}
		if err := w.PutUser(user(2, "Two"), 1); err != nil {
			return err
		}
		var err error
		if dev1, err = w.AddDevice(1, bigToken); err != nil {
			return err
		}
		if dev2, err = w.AddDevice(1, "small"); err != nil {
			return err
		}
		return w.SetSetting(1, "like_update", notify.Push, false)
	})
	v := open(t)
	e.start(t, v)
	e.same(t, v)

	steps := []func(w *Writer) error{
		// TOAST: name is not sent ('u'), the view keeps its own.
		func(w *Writer) error {
			return w.Exec(`UPDATE ` + w.Table("users") + ` SET opt_out = true WHERE id = 1`)
		},
		// The device with the big token moves to user 2: token 'u'.
		func(w *Writer) error {
			return w.Exec(`UPDATE `+w.Table("user_devices")+` SET user_id = 2 WHERE id = $1`, dev1)
		},
		// A key change: the old key comes with the update.
		func(w *Writer) error {
			return w.Exec(`UPDATE ` + w.Table("user_settings") + ` SET type = 'event_waiting_list' WHERE user_id = 1`)
		},
		func(w *Writer) error {
			return w.Exec(`UPDATE `+w.Table("user_devices")+` SET id = id + 1000 WHERE id = $1`, dev2)
		},
		// Both at once in one transaction, then undone in part.
		func(w *Writer) error {
			if err := w.Exec(`UPDATE ` + w.Table("users") + ` SET language = 'nl' WHERE id = 1`); err != nil {
				return err
			}
			if err := w.Exec(`UPDATE ` + w.Table("users") + ` SET name = 'short' WHERE id = 1`); err != nil {
				return err
			}
			return w.Exec(`UPDATE ` + w.Table("users") + ` SET name = 'shorter', opt_out = false WHERE id = 1`)
		},
		// Replica identity full: deletes and updates carry the whole old row.
		func(w *Writer) error {
			return w.Exec(`ALTER TABLE ` + w.Table("user_devices") + ` REPLICA IDENTITY FULL`)
		},
		func(w *Writer) error {
			return w.Exec(`DELETE FROM `+w.Table("user_devices")+` WHERE id = $1`, dev2+1000)
		},
		func(w *Writer) error {
			return w.Exec(`UPDATE `+w.Table("user_devices")+` SET user_id = 1 WHERE id = $1`, dev1)
		},
		func(w *Writer) error { return w.DeleteUser(2) },
		func(w *Writer) error {
			if err := w.PutUser(user(3, "Three"), 1); err != nil {
				return err
			}
			return w.SetSetting(3, "like_update", notify.Email, true)
		},
		func(w *Writer) error { return w.Exec(`TRUNCATE ` + w.Table("user_settings")) },
		func(w *Writer) error { return w.SetSetting(3, "like_update", notify.Email, false) },
	}
	for i, step := range steps {
		lsn := e.write(t, step)
		wait(t, v, lsn)
		t.Run(fmt.Sprint("step", i), func(t *testing.T) { e.same(t, v) })
	}
	got, err := v.Users(context.Background(), []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	if u := got[1]; u == nil || u.Name != "shorter" || !slices.Equal(u.DeviceTokens, []string{bigToken}) {
		t.Fatalf("user 1: %+v", u)
	}
}

func TestRestartAndChangesWhileDown(t *testing.T) {
	e := newEnv(t)
	e.write(t, func(w *Writer) error { return w.PutUser(user(1, "One"), 1) })
	dir := t.TempDir()
	v := openView(t, dir)
	f := e.start(t, v)
	lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(2, "Two"), 1) })
	wait(t, v, lsn)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// The slot confirmed what the view had: Close reports it. The
	// walsender reads that report before it sees the connection close,
	// but may still be reading it when Close returns: the slot is read
	// once its walsender has ended.
	var confirmed LSN
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var active bool
		if err := e.src.Pool.QueryRow(context.Background(), `SELECT active, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot).Scan(&active, &confirmed); err != nil {
			t.Fatal(err)
		}
		if !active || time.Now().After(deadline) {
			break
		}
	}
	if confirmed < lsn {
		t.Errorf("slot confirmed %s, the view had %s", confirmed, lsn)
	}
	// Changes while logbook is down.
	e.write(t, func(w *Writer) error { return w.PutUser(user(3, "Three"), 1) })
	lsn = e.write(t, func(w *Writer) error {
		if err := w.DeleteUser(1); err != nil {
			return err
		}
		return w.SetSetting(2, "like_update", notify.Push, false)
	})
	v = openView(t, dir)
	e.start(t, v)
	wait(t, v, lsn)
	e.same(t, v)
	lsn = e.write(t, func(w *Writer) error { return w.PutUser(user(4, "Four"), 1) })
	wait(t, v, lsn)
	e.same(t, v)
}

// randomTx writes a transaction of 1 to 5 random changes.
func randomTx(rng *mrand.Rand, w *Writer) error {
	types := []string{"like_update", "event_waiting_list", "club_news"}
	for range 1 + rng.IntN(5) {
		id := int64(1 + rng.IntN(60))
		var err error
		switch op := rng.IntN(100); {
		case op < 25:
			u := user(id, fmt.Sprintf("n%d", rng.IntN(1000)))
			u.OptOut = rng.IntN(8) == 0
			if rng.IntN(4) == 0 {
				u.Email = ""
			}
			u.Language = []string{"en", "nl", ""}[rng.IntN(3)]
			err = w.PutUser(u, int64(rng.IntN(3)))
		case op < 32:
			err = w.DeleteUser(id)
		case op < 55:
			err = w.Exec(`INSERT INTO `+w.Table("user_settings")+` (user_id, type, channel, enabled)
				SELECT id, $2, $3, $4 FROM `+w.Table("users")+` WHERE id = $1
				ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = excluded.enabled`,
				id, types[rng.IntN(3)], string(notify.Channels[rng.IntN(2)]), rng.IntN(2) == 0)
		case op < 62:
			err = w.DeleteSetting(id, types[rng.IntN(3)], notify.Channels[rng.IntN(2)])
		case op < 66: // a key change, where it conflicts with nothing
			err = w.Exec(`UPDATE `+w.Table("user_settings")+` s SET type = $2 WHERE user_id = $1 AND type = $3
				AND NOT EXISTS (SELECT 1 FROM `+w.Table("user_settings")+` o WHERE o.user_id = s.user_id AND o.type = $2 AND o.channel = s.channel)`,
				id, types[rng.IntN(3)], types[rng.IntN(3)])
		case op < 80:
			err = w.Exec(`INSERT INTO `+w.Table("user_devices")+` (user_id, token) SELECT id, $2 FROM `+w.Table("users")+` WHERE id = $1`,
				id, fmt.Sprintf("t%d", rng.IntN(1_000_000)))
		case op < 86:
			err = w.Exec(`DELETE FROM `+w.Table("user_devices")+` WHERE id = (SELECT min(id) FROM `+w.Table("user_devices")+` WHERE user_id = $1)`, id)
		case op < 93: // a device moves to another user
			err = w.Exec(`UPDATE `+w.Table("user_devices")+` SET user_id = $2 WHERE id = (SELECT max(id) FROM `+w.Table("user_devices")+` WHERE user_id = $1)
				AND EXISTS (SELECT 1 FROM `+w.Table("users")+` WHERE id = $2)`, id, int64(1+rng.IntN(60)))
		default:
			err = w.Exec(`UPDATE `+w.Table("user_devices")+` SET token = $2 WHERE user_id = $1`, id, fmt.Sprintf("t%d", rng.IntN(1_000_000)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Many random transactions, some before the snapshot, the rest while the
// follower streams and across a restart, against the source's own rows.
func TestRandomizedAgainstSource(t *testing.T) {
	e := newEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 7))
	write := func(n int) LSN {
		var lsn LSN
		for range n {
			lsn = e.write(t, func(w *Writer) error { return randomTx(rng, w) })
		}
		return lsn
	}
	write(100)
	dir := t.TempDir()
	v := openView(t, dir)
	f := e.start(t, v)
	e.same(t, v)
	for range 4 {
		wait(t, v, write(100))
		e.same(t, v)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_ = v.Close()
	write(50)
	v = openView(t, dir)
	e.start(t, v)
	wait(t, v, write(100))
	e.same(t, v)
}

// The preference check sees a settings change within a second (p99): the
// project's target. The test checks a generous bound on a shared machine;
// docs/benchmarks.md has the measured figure.
func TestSettingsChangeLag(t *testing.T) {
	e := newEnv(t)
	if err := e.src.Generate(context.Background(), Population{Users: 1000, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	v := openView(t, t.TempDir())
	e.start(t, v)
	lags, err := MeasureLag(context.Background(), e.src, v, 300, "like_update")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("settings change visible: %s", lags)
	if lags.P99 > 2*time.Second {
		t.Fatalf("p99 %v over the 1 s floor (with room for a busy machine)", lags.P99)
	}
}

func TestSlotAndPublicationErrors(t *testing.T) {
	e := newEnv(t)
	e.write(t, func(w *Writer) error { return w.PutUser(user(1, "One"), 1) })
	dir := t.TempDir()
	v := openView(t, dir)
	f := e.start(t, v)
	ctx := context.Background()

	// Another view on the same slot.
	other := openView(t, t.TempDir())
	if _, err := Start(ctx, other, e.cfg); !errors.Is(err, ErrSlotTaken) {
		t.Fatalf("a second view on the slot: %v, want ErrSlotTaken", err)
	}

	// The publication dropped while streaming.
	if _, err := e.src.Pool.Exec(ctx, `DROP PUBLICATION `+e.cfg.Publication); err != nil {
		t.Fatal(err)
	}
	lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(2, "Two"), 1) })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := v.WaitFor(wctx, lsn); !errors.Is(err, ErrPublicationMissing) {
		t.Fatalf("wait with the publication dropped: %v, want ErrPublicationMissing", err)
	}
	if err := f.Close(); !errors.Is(err, ErrPublicationMissing) {
		t.Fatalf("Close: %v, want ErrPublicationMissing", err)
	}
	if _, err := Start(ctx, v, e.cfg); !errors.Is(err, ErrPublicationMissing) {
		t.Fatalf("restart without the publication: %v, want ErrPublicationMissing", err)
	}
	t.Logf("the error: %v", func() error { _, err := Start(ctx, v, e.cfg); return err }())

	// The slot dropped while the view was down.
	if _, err := e.src.Pool.Exec(ctx, `CREATE PUBLICATION `+e.cfg.Publication+` FOR TABLE `+
		e.src.Table("users")+`, `+e.src.Table("user_settings")+`, `+e.src.Table("user_devices")); err != nil {
		t.Fatal(err)
	}
	dropSlot(t, e)
	_, err := Start(ctx, v, e.cfg)
	if !errors.Is(err, ErrSlotMissing) {
		t.Fatalf("restart without the slot: %v, want ErrSlotMissing", err)
	}
	t.Logf("the error: %v", err)
	cfg := e.cfg
	cfg.Resnapshot = true
	f, err = Start(ctx, v, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e.same(t, v)
}

func dropSlot(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := e.src.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, e.cfg.Slot)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A snapshot interrupted (the process died while copying) is taken again
// from a new slot.
func TestInterruptedSnapshotStartsOver(t *testing.T) {
	e := newEnv(t)
	e.write(t, func(w *Writer) error { return w.PutUser(user(1, "One"), 1) })
	dir := t.TempDir()
	v := openView(t, dir)
	// What a kill in the middle of the copy leaves: the marker, a slot,
	// part of the rows.
	b := v.newBatch()
	_ = b.b.Set(snapshotKey, []byte(e.cfg.Slot), nil)
	_ = b.b.Set(idKey(prefixUser, 77), userRow{Name: "stale"}.encode(), nil)
	if err := b.commit(0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.src.Pool.Exec(context.Background(), `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, e.cfg.Slot); err != nil {
		t.Fatal(err)
	}
	e.start(t, v)
	e.same(t, v)
	lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(2, "Two"), 1) })
	wait(t, v, lsn)
	e.same(t, v)
}

// A terminated walsender (or a server restart) is reconnected to; a
// follower closed and started again on the same open view goes on.
func TestReconnectAndRestartOnOpenView(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(t, func(w *Writer) error { return w.PutUser(user(1, "One"), 1) })
	v := openView(t, t.TempDir())
	f := e.start(t, v)
	if _, err := Start(ctx, v, e.cfg); err == nil {
		t.Fatal("a second follower on one view started")
	}
	for i := range 3 {
		var n int
		if err := e.src.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, e.cfg.Slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("terminated %d walsenders, want 1", n)
		}
		lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(int64(10+i), "after a kill"), 1) })
		wait(t, v, lsn)
		e.same(t, v)
		// The next kill must find the new walsender.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var active bool
			if err := e.src.Pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot).Scan(&active); err != nil {
				t.Fatal(err)
			}
			if active || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	lsn := e.write(t, func(w *Writer) error { return w.DeleteUser(1) })
	e.start(t, v)
	wait(t, v, lsn)
	e.same(t, v)
}

// A transaction larger than MaxBatchBytes goes into the view in parts,
// and a snapshot too; the result is the source's rows.
func TestLargeTransactionInParts(t *testing.T) {
	e := newEnv(t)
	e.cfg.MaxBatchBytes = 4096
	e.write(t, func(w *Writer) error {
		return w.Exec(`INSERT INTO ` + w.Table("users") + ` (id, name) SELECT i, 'u' || i FROM generate_series(1, 2000) i`)
	})
	v := openView(t, t.TempDir())
	e.start(t, v)
	e.same(t, v)
	lsn := e.write(t, func(w *Writer) error {
		if err := w.Exec(`INSERT INTO ` + w.Table("users") + ` (id, name) SELECT i, 'u' || i FROM generate_series(2001, 4000) i`); err != nil {
			return err
		}
		if err := w.Exec(`INSERT INTO ` + w.Table("user_devices") + ` (user_id, token) SELECT i, 't' || i FROM generate_series(1, 4000) i`); err != nil {
			return err
		}
		if err := w.Exec(`UPDATE ` + w.Table("user_devices") + ` SET user_id = 4001 - user_id`); err != nil {
			return err
		}
		return w.Exec(`DELETE FROM ` + w.Table("users") + ` WHERE id % 3 = 0`)
	})
	wait(t, v, lsn)
	e.same(t, v)
}

// Changes to tables the view does not follow still move its position
// (keepalives between transactions), and the slot's confirmed position
// with it: the source does not keep WAL for an idle view.
func TestIdleViewConfirmsOtherTraffic(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := openView(t, t.TempDir())
	e.start(t, v)
	if _, err := e.src.Pool.Exec(ctx, `CREATE TABLE `+e.src.Table("other")+` (n int)`); err != nil {
		t.Fatal(err)
	}
	var lsn LSN
	for i := range 20 {
		if _, err := e.src.Pool.Exec(ctx, `INSERT INTO `+e.src.Table("other")+` VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.src.Pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	wait(t, v, lsn)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var confirmed LSN
		if err := e.src.Pool.QueryRow(ctx, `SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1`, e.cfg.Slot).Scan(&confirmed); err != nil {
			t.Fatal(err)
		}
		if confirmed >= lsn {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot confirmed %s, the view is at %s past %s", confirmed, v.Position(), lsn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
