package userscdc

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
)

// The view keeps club membership from the snapshot and the stream: a
// user moved to another club, one who leaves every club, one deleted,
// and a truncate all show in Members and Clubs.
func TestClubMembership(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.src.Generate(ctx, Population{Users: 10, Clubs: 3}); err != nil {
		t.Fatal(err)
	}
	v := openView(t, t.TempDir())
	e.start(t, v)
	var counts atomic.Int64
	testHookCountClubs = func() { counts.Add(1) }
	t.Cleanup(func() { testHookCountClubs = nil })
	// Generate puts user id in club 1 + id%3.
	want := map[int64][]int64{1: {3, 6, 9}, 2: {1, 4, 7, 10}, 3: {2, 5, 8}}
	check := func(want map[int64][]int64) {
		t.Helper()
		clubs, err := v.Clubs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []Club
		for _, c := range []int64{1, 2, 3, 4} {
			if len(want[c]) > 0 {
				got = append(got, Club{ID: c, Members: int64(len(want[c]))})
			}
			m, err := v.Members(ctx, c, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m, want[c]) {
				t.Errorf("club %d: members %v, want %v", c, m, want[c])
			}
		}
		if !slices.Equal(clubs, got) {
			t.Errorf("clubs %v, want %v", clubs, got)
		}
		// Asked again with nothing changed: answered without counting
		// again.
		n := counts.Load()
		for range 3 {
			again, err := v.Clubs(ctx)
			if err != nil || !slices.Equal(again, clubs) {
				t.Fatalf("clubs asked again: %v, %v; first %v", again, err, clubs)
			}
		}
		if counts.Load() != n {
			t.Errorf("3 more Clubs calls counted the members %d more times, want 0 (the view did not move)", counts.Load()-n)
		}
	}
	check(want)
	if _, err := v.Members(ctx, 2, 3); err == nil {
		t.Error("Members beyond max: no error")
	}
	wait(t, v, e.write(t, func(w *Writer) error {
		if err := w.Exec(`UPDATE ` + w.Table(tableUsers) + ` SET club_id = 4 WHERE id = 3`); err != nil {
			return err
		}
		if err := w.Exec(`UPDATE ` + w.Table(tableUsers) + ` SET club_id = NULL WHERE id = 4`); err != nil {
			return err
		}
		if err := w.Exec(`UPDATE ` + w.Table(tableUsers) + ` SET name = 'renamed' WHERE id = 5`); err != nil {
			return err
		}
		return w.DeleteUser(9)
	}))
	check(map[int64][]int64{1: {6}, 2: {1, 7, 10}, 3: {2, 5, 8}, 4: {3}})
	wait(t, v, e.write(t, func(w *Writer) error { return w.Exec(`TRUNCATE ` + w.Table(tableUsers) + ` CASCADE`) }))
	check(nil)
}
