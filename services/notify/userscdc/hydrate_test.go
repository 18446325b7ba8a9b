package userscdc

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/services/notify"
)

// holdCopy makes the snapshot copy wait, at the start of its first
// table, until the returned release is called (or the copy's context
// ends); entered is closed once the copy waits.
func holdCopy(t *testing.T) (entered <-chan struct{}, release func()) {
	t.Helper()
	in, hold := make(chan struct{}), make(chan struct{})
	var once, rel sync.Once
	TestHookCopy = func(ctx context.Context, _ string) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(in)
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	release = func() { rel.Do(func() { close(hold) }) }
	t.Cleanup(func() { release(); TestHookCopy = nil })
	return in, release
}

// With ServeDuringCopy, Start returns while the copy is held, and the
// view answers from the slot's exported snapshot: a lookup of every user
// (several chunks of ids), club members and counts, all as the source
// was when the slot was created — also for users changed after it (a
// setting switched, a user deleted, one added, one renamed): those show
// their snapshot version, the view's position is the consistent point,
// and waiting for the change waits. Released, the copy commits, the
// stream applies the change, and the view equals the source.
func TestServeDuringCopy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 25_000
	if err := e.src.Generate(ctx, Population{Users: n, Clubs: 7, Type: "like_update", Refuse: 0.1, OptOut: 0.02, NoEmail: 0.1, NoPush: 0.2, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	before, err := e.src.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wantClubs []Club
	rows, _ := e.src.Pool.Query(ctx, `SELECT club_id, count(*) FROM `+e.src.Table(tableUsers)+` GROUP BY club_id ORDER BY club_id`)
	wantClubs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Club, error) {
		var c Club
		return c, r.Scan(&c.ID, &c.Members)
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := holdCopy(t)
	e.cfg.ServeDuringCopy = true
	v := openView(t, t.TempDir())
	e.start(t, v)
	<-entered
	if st, err := v.Ready(); st != "snapshot" || err != nil {
		t.Fatalf("Ready during the copy: %q, %v", st, err)
	}
	consistent := v.Position()
	if consistent == 0 {
		t.Fatal("no position while the copy runs")
	}

	// Changes after the slot was created.
	u5 := before[5]
	offBefore := u5.Disabled[notify.Setting{Type: "like_update", Channel: notify.Push}]
	lsn := e.write(t, func(w *Writer) error {
		if err := w.SetSetting(5, "like_update", notify.Push, offBefore); err != nil { // switched
			return err
		}
		if err := w.DeleteUser(6); err != nil {
			return err
		}
		if err := w.PutUser(user(n+1, "new"), 1); err != nil {
			return err
		}
		return w.Exec(`UPDATE ` + w.Table(tableUsers) + ` SET name = 'renamed' WHERE id = 7`)
	})
	if lsn <= consistent {
		t.Fatalf("a change at %s, not after the consistent point %s", lsn, consistent)
	}

	ids := make([]int64, 0, n+10)
	for id := int64(n + 5); id > 0; id-- { // unsorted, with unknown ids
		ids = append(ids, id)
	}
	got, err := v.Users(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, before) {
		for id, w := range before {
			if !reflect.DeepEqual(got[id], w) {
				t.Errorf("user %d during the copy: %+v, the snapshot's %+v", id, got[id], w)
				break
			}
		}
		t.Fatalf("during the copy: %d users, the snapshot %d", len(got), len(before))
	}
	if all, err := v.All(ctx); err != nil || len(all) != n {
		t.Fatalf("All during the copy: %d users, %v", len(all), err)
	}
	clubs, err := v.Clubs(ctx)
	if err != nil || !slices.Equal(clubs, wantClubs) {
		t.Fatalf("Clubs during the copy: %v, %v; want %v", clubs, err, wantClubs)
	}
	// The snapshot does not change: asked again, Clubs does not count
	// (a GROUP BY over the source's table) again.
	var counts atomic.Int64
	testHookCountClubs = func() { counts.Add(1) }
	for range 3 {
		if again, err := v.Clubs(ctx); err != nil || !slices.Equal(again, wantClubs) {
			t.Fatalf("Clubs again during the copy: %v, %v", again, err)
		}
	}
	testHookCountClubs = nil
	if counts.Load() != 0 {
		t.Errorf("Clubs during the copy counted %d times more, want 0", counts.Load())
	}
	members, err := v.Members(ctx, 3, 0)
	if err != nil || int64(len(members)) != wantClubs[2].Members || !slices.IsSorted(members) || members[0]%7 != 2 {
		t.Fatalf("Members(3) during the copy: %d, %v", len(members), err)
	}
	if _, err := v.Members(ctx, 3, 10); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("Members beyond max during the copy: %v", err)
	}
	// A cancelled lookup breaks its connection; the next one gets another.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.Users(cctx, ids); err == nil {
		t.Fatal("a cancelled lookup did not fail")
	}
	if got, err := v.Users(ctx, []int64{5, 6, 7}); err != nil || !reflect.DeepEqual(got[5], before[5]) || got[6] == nil || got[7].Name != before[7].Name {
		t.Fatalf("after a cancelled lookup: %+v, %v", got, err)
	}
	// The view's position is the consistent point until the copy is in.
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	if err := v.WaitFor(wctx, consistent); err != nil {
		t.Fatalf("WaitFor the consistent point during the copy: %v", err)
	}
	if err := v.WaitFor(wctx, lsn); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor a later change during the copy: %v", err)
	}

	release()
	wait(t, v, lsn)
	if st, err := v.Ready(); st != "view" || err != nil {
		t.Fatalf("Ready after the copy: %q, %v", st, err)
	}
	e.same(t, v)
	after, err := v.Users(ctx, []int64{5, 6, 7, n + 1})
	if err != nil {
		t.Fatal(err)
	}
	if after[5].Disabled[notify.Setting{Type: "like_update", Channel: notify.Push}] == offBefore || after[6] != nil || after[7].Name != "renamed" || after[n+1] == nil {
		t.Fatalf("after the copy the change is missing: %+v", after)
	}
}

// A follower closed while it copies in the background leaves a view
// that does not answer (its rows are part of a snapshot), and that the
// next Start fills from a new slot.
func TestCloseDuringBackgroundCopy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.src.Generate(ctx, Population{Users: 100, Seed: 6}); err != nil {
		t.Fatal(err)
	}
	entered, _ := holdCopy(t)
	e.cfg.ServeDuringCopy = true
	v := openView(t, t.TempDir())
	f := e.start(t, v)
	<-entered
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Users(ctx, []int64{1}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("a lookup after the copy stopped: %v, want ErrIncomplete", err)
	}
	if _, err := v.Ready(); err == nil {
		t.Fatal("Ready after the copy stopped: no error")
	}
	TestHookCopy = nil
	e.cfg.ServeDuringCopy = false
	e.start(t, v)
	e.same(t, v)
}

// The replication session that exported the snapshot idles in its export
// transaction for as long as the copy takes; a server whose sessions may
// idle in a transaction only briefly (idle_in_transaction_session_timeout,
// here 300 ms for every session of the follower, as a role's or the
// server's setting would be) must not end it, or the snapshot and the
// stream after it are lost.
func TestCopyOutlastsIdleInTransactionTimeout(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.src.Generate(ctx, Population{Users: 1000, Clubs: 3, Type: "like_update", Refuse: 0.1, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(e.url, "?") {
		sep = "&"
	}
	e.cfg.URL = e.url + sep + "options=" + strings.ReplaceAll(url.PathEscape("-c idle_in_transaction_session_timeout=300ms"), "=", "%3D")
	e.cfg.ServeDuringCopy = true
	entered, release := holdCopy(t)
	v := openView(t, t.TempDir())
	f := e.start(t, v)
	<-entered
	time.Sleep(900 * time.Millisecond) // three times the timeout, in the copy
	if us, err := v.Users(ctx, []int64{1, 2, 3}); err != nil || len(us) != 3 {
		t.Fatalf("a lookup from the snapshot after the wait: %d users, %v", len(us), err)
	}
	release()
	lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(5000, "after"), 1) })
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := v.WaitFor(wctx, lsn); err != nil {
		t.Fatalf("the stream after the copy: %v (follower: %v)", err, f.Err())
	}
	if us, err := v.Users(ctx, []int64{5000}); err != nil || us[5000] == nil || us[5000].Name != "after" {
		t.Fatalf("the change after the copy: %+v, %v", us, err)
	}
}
