package main

import (
	"runtime"
	"testing"
)

func TestProcsFor(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 3}, {2, 4}, {8, 10}} {
		if got := procsFor(c.n); got != c.want {
			t.Errorf("procsFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// tuneProcs adds the spare processors once to the default, and leaves an
// explicit GOMAXPROCS alone.
func TestTuneProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(n) })
	t.Setenv("GOMAXPROCS", "")
	tuneProcs()
	if got := runtime.GOMAXPROCS(0); got != n+spareProcs {
		t.Fatalf("GOMAXPROCS %d after tuneProcs, want %d", got, n+spareProcs)
	}
	runtime.GOMAXPROCS(n)
	t.Setenv("GOMAXPROCS", "1")
	tuneProcs()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS set: tuneProcs changed the processors from %d to %d", n, got)
	}
}
