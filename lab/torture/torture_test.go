package torture

import (
	"context"
	"testing"
)

// The power-loss checks pass on the store as it is, for the log alone and
// with a checkpointed view following it.
func TestPowerCuts(t *testing.T) {
	for _, kind := range []string{"events", "projection", "removals"} {
		t.Run(kind, func(t *testing.T) {
			cfg := Config{CrashPoints: 200, Seed: 7, Kind: kind}
			if kind == "removals" {
				cfg.Kind, cfg.Removals = "events", true
			}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.LostAcknowledged != 0 || res.Violations != 0 {
				t.Fatalf("%+v", res)
			}
			if res.CrashPoints != 200 || res.Acknowledged < 200 || (kind == "projection" && res.ViewCheckpoint < 400) {
				t.Fatalf("too little was checked: %+v", res)
			}
			if cfg.Removals && (res.Removals < 50 || res.RemovedEvents == 0) {
				t.Fatalf("too little was removed: %+v", res)
			}
			t.Logf("%d cuts, %d acknowledged appends checked (%d events of them removed), %d removals acknowledged, %d events at the cuts, %.1f s", res.CrashPoints, res.Acknowledged, res.RemovedEvents, res.Removals, res.EventsAtCuts, res.Seconds)
		})
	}
}

// The checks are a durability test: with appends acknowledged before
// their fsync, power cuts lose acknowledged appends and the run says so.
func TestPowerCutsCatchUnsyncedAcknowledgements(t *testing.T) {
	for _, removals := range []bool{false, true} {
		res, err := Run(context.Background(), Config{CrashPoints: 50, Seed: 7, NoSync: true, Removals: removals})
		if err != nil {
			t.Fatal(err)
		}
		if res.LostAcknowledged == 0 {
			t.Fatalf("removals %v: no acknowledged append lost without fsync: the checks cannot see a durability bug: %+v", removals, res)
		}
		t.Logf("removals %v, without fsync: %d of %d acknowledged appends lost, %d other violations; first: %v", removals, res.LostAcknowledged, res.Acknowledged, res.Violations, res.FirstProblems[0])
	}
}
