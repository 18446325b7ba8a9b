package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal 120 columns wide: what the program
// writes to tty, the test reads from the returned channel's buffer once
// tty is closed.
func openPTY(t *testing.T) (tty *os.File, output <-chan string) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptm) // ends with EIO once tty is closed
		ptm.Close()
		out <- b.String()
	}()
	return tty, out
}

// TestProgressOnATerminal runs a benchmark on a terminal: a bar is drawn,
// named after the command, counting the events; with --json it is not.
func TestProgressOnATerminal(t *testing.T) {
	for _, c := range []struct {
		json bool
		want string
	}{{false, "2,000 / 2,000 events"}, {true, ""}} {
		tty, output := openPTY(t)
		args := []string{"bench", "append", "--data", t.TempDir(), "--events", "2000", "--batch", "10", "--streams", "10"}
		if c.json {
			args = append(args, "--json")
		}
		code := run(context.Background(), &env{stdout: tty, stderr: tty, getenv: os.Getenv}, args)
		tty.Close()
		out := <-output
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
		drawn := strings.Contains(out, "bench append") && strings.Contains(out, "events")
		if !c.json && (!drawn || !strings.Contains(out, c.want)) {
			t.Errorf("no progress bar with %q on a terminal:\n%q", c.want, out)
		}
		if c.json && strings.Contains(out, "bench append") {
			t.Errorf("a progress bar with --json:\n%q", out)
		}
	}
}
