package cliutil

import (
	"runtime"
	"testing"
)

func TestProcsFor(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 3}, {2, 4}, {8, 10}} {
		if got := ProcsFor(c.n); got != c.want {
			t.Errorf("ProcsFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TuneProcs adds the spare processors once to the default, and leaves an
// explicit GOMAXPROCS alone.
func TestTuneProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(n) })
	t.Setenv("GOMAXPROCS", "")
	TuneProcs()
	if got := runtime.GOMAXPROCS(0); got != n+spareProcs {
		t.Fatalf("GOMAXPROCS %d after TuneProcs, want %d", got, n+spareProcs)
	}
	runtime.GOMAXPROCS(n)
	t.Setenv("GOMAXPROCS", "1")
	TuneProcs()
	if got := runtime.GOMAXPROCS(0); got != n {
		t.Fatalf("GOMAXPROCS set: TuneProcs changed the processors from %d to %d", n, got)
	}
}
