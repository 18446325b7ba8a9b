package bench

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// TestWindowsVerifies runs a small bench windows: the recomputation must
// find no mismatch, and every late event injected must be counted.
func TestWindowsVerifies(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := RunWindows(context.Background(), st, WindowsConfig{Events: 40_000, LiveEvents: 4_000, Senders: 50, Types: 4, MaxBatch: 1000, Verify: true, AggDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mismatches != 0 || res.LateInjected == 0 || res.LateCounted != res.LateInjected || res.Queries < 100 || res.QueryRows == 0 {
		t.Errorf("%+v", res)
	}
	if _, err := RunWindows(context.Background(), st, WindowsConfig{Events: 10, Senders: 1, Types: 1}); err == nil {
		t.Error("ran on a store that is not empty")
	}
}
