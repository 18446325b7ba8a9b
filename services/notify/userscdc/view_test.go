package userscdc

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/services/notify"
)

func txtRow(kv ...string) row {
	r := row{}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "\x00null" {
			r[kv[i]] = col{kind: 'n'}
		} else {
			r[kv[i]] = col{'t', kv[i+1]}
		}
	}
	return r
}

// The view's rows and lookups without a source: negative and extreme
// ids sort and read back, settings switched on are not Disabled, and a
// directory that is not a users view is refused.
func TestViewRowsAndLookups(t *testing.T) {
	dir := t.TempDir()
	v, err := OpenView(dir, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{math.MinInt64, -1, 0, 1, 7, math.MaxInt64}
	b := v.newBatch()
	for i, id := range ids {
		s := strconv.FormatInt(id, 10)
		must(t, b.upsert(tableUsers, nil, txtRow("id", s, "name", "n"+s, "language", "nl", "email", "\x00null", "opt_out", "f")))
		must(t, b.upsert(tableSettings, nil, txtRow("user_id", s, "type", "like_update", "channel", "push", "enabled", "f")))
		must(t, b.upsert(tableSettings, nil, txtRow("user_id", s, "type", "like_update", "channel", "email", "enabled", "t")))
		must(t, b.upsert(tableDevices, nil, txtRow("id", strconv.Itoa(i*2), "user_id", s, "token", "a"+s)))
		must(t, b.upsert(tableDevices, nil, txtRow("id", strconv.Itoa(i*2+1), "user_id", s, "token", "b"+s)))
	}
	// A device moves from the last user to the first, one is deleted.
	must(t, b.upsert(tableDevices, nil, txtRow("id", "11", "user_id", strconv.FormatInt(math.MinInt64, 10), "token", "moved")))
	must(t, b.delete(tableDevices, txtRow("id", "0")))
	must(t, b.commit(42, false))
	if v.Position() != 42 {
		t.Fatalf("position %s", v.Position())
	}
	got, err := v.Users(context.Background(), append(ids, 5))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d users, want %d", len(got), len(ids))
	}
	for i, id := range ids {
		s := strconv.FormatInt(id, 10)
		want := &notify.User{ID: id, Name: "n" + s, Language: "nl", DeviceTokens: []string{"a" + s, "b" + s},
			Disabled: map[notify.Setting]bool{{Type: "like_update", Channel: notify.Push}: true}}
		switch i {
		case 0:
			want.DeviceTokens = []string{"b" + s, "moved"}
		case len(ids) - 1:
			want.DeviceTokens = []string{"a" + s}
		}
		if !reflect.DeepEqual(got[id], want) {
			t.Errorf("user %d: %+v, want %+v", id, got[id], want)
		}
	}
	must(t, v.Close())

	v, err = OpenView(dir, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Position() != 42 {
		t.Fatalf("position after reopening %s", v.Position())
	}
	must(t, v.Close())

	other := t.TempDir()
	db, err := pebble.Open(other, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, db.Set([]byte("k"), []byte("v"), pebble.Sync))
	must(t, db.Close())
	if _, err := OpenView(other, ViewOptions{}); err == nil || !strings.Contains(err.Error(), "not a logbook users view") {
		t.Fatalf("opening another database: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
