package pebblekv_test

import (
	"testing"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Backend {
		b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, kvtest.Full(kvtest.Options{}))
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := kv.New(b, kv.Limits{})
	if err := r.Add(t.Context(), "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(t.Context(), "a/b", 1, nil); err == nil {
		t.Fatal("update after close succeeded")
	}
	b, err = pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r = kv.New(b, kv.Limits{})
	defer r.Close()
	if e, ok, err := r.Get(t.Context(), "a/b"); err != nil || !ok || e.Version != 1 || string(e.Value) != "x" {
		t.Fatalf("after reopen: %+v %v %v", e, ok, err)
	}
}
