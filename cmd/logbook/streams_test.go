package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// The streams commands delete, truncate and expire on an embedded store,
// and the sweep reclaims what they removed.
func TestStreamsCommands(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, st := range []string{"a", "b", "s-1", "s-2"} {
		if _, err := s.Append(ctx, st, eventstore.NoStream, make5()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{
		{"streams", "delete", "--stream", "a", "--data", dir},
		{"streams", "delete", "--stream", "b", "--hard", "--data", dir},
		{"streams", "retention", "--prefix", "s-", "--max-count", "2", "--data", dir},
	} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, "streams", "sweep", "--data", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("sweep: exit %d: %s", code, stderr)
	}
	var res struct{ Truncated, Removed, Pending int }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Truncated != 2 || res.Removed != 16 || res.Pending != 0 {
		t.Fatalf("sweep printed %s (%v); want 2 truncated, 16 removed (a, b and 3 of each s-), none pending", stdout, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"streams", "delete", "--data", dir}, "--stream is required"},
		{[]string{"streams", "truncate", "--stream", "a", "--before", "1", "--data", dir}, "at least 2"},
		{[]string{"streams", "retention", "--max-count", "3", "--data", dir}, "need --stream or --prefix"},
		{[]string{"streams", "retention", "--stream", "a", "--prefix", "b", "--data", dir}, "none of the others can be"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}

	s, err = pebblestore.Open(dir, pebblestore.Options{NoSync: true, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ReadStream(ctx, "a", 1, 10); !errors.Is(err, eventstore.ErrStreamDeleted) {
		t.Errorf("read of a: %v, want ErrStreamDeleted", err)
	}
	if _, err := s.Append(ctx, "b", eventstore.Any, make5()); !errors.Is(err, eventstore.ErrStreamTombstoned) {
		t.Errorf("append to b: %v, want ErrStreamTombstoned", err)
	}
	all, err := s.ReadAll(ctx, 1, 100)
	if err != nil || len(all) != 4 || all[0].Stream != "s-1" || all[0].Seq != 4 {
		t.Fatalf("ReadAll after the commands: %d events (%v), want s-1's and s-2's last two", len(all), err)
	}
}

func make5() []eventstore.NewEvent {
	evs := make([]eventstore.NewEvent, 5)
	for i := range evs {
		evs[i] = eventstore.NewEvent{Type: "E"}
	}
	return evs
}
