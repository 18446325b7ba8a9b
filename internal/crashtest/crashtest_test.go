//go:build unix

package crashtest_test

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/internal/crashtest"
)

// TestCounterChild is the workload of TestKill: it counts on stdout until
// it is killed.
func TestCounterChild(t *testing.T) {
	out := crashtest.Child(t)
	out.Printf("READY")
	for i := 0; ; i++ {
		out.Printf("N %d", i)
		time.Sleep(100 * time.Microsecond)
	}
}

// TestKill checks that the harness runs the named workload in a child,
// passes on its lines whole and in order, and kills it.
func TestKill(t *testing.T) {
	var got []int
	child := crashtest.Start(t, crashtest.Spec{
		Test: "TestCounterChild",
		Line: func(line string) {
			if n, ok := strings.CutPrefix(line, "N "); ok {
				v, err := strconv.Atoi(n)
				if err != nil {
					t.Errorf("line %q cut short", line)
				}
				got = append(got, v)
			}
		},
	})
	if !child.WaitFor("READY", 30*time.Second) || !child.WaitFor("N", 30*time.Second) {
		t.Fatal("the child did not start counting")
	}
	time.Sleep(20 * time.Millisecond)
	child.Kill()
	if len(got) == 0 {
		t.Fatal("no line came after READY")
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("line %d says %d: lines lost or out of order", i, v)
		}
	}
}

// TestFSCrash checks that a crash keeps what was synced and loses what
// was not.
func TestFSCrash(t *testing.T) {
	fs := crashtest.NewFS()
	f, err := fs.Create("log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("synced ")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("/", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := fs.OpenDir("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Sync(); err != nil { // the file's directory entry
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	crashed := fs.Crash(0, nil)
	g, err := crashed.Open("log")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "synced " {
		t.Errorf("after the crash the file holds %q, want only the synced %q", b, "synced ")
	}
}
