//go:build unix

// Package crashtest is the harness of logbook's crash tests. It offers two
// ways to crash a workload and then check what it left behind:
//
//   - A real process kill. [Start] re-executes the test binary as a child
//     that runs one named test function — the workload, which calls
//     [Child] first — and reads the lines the child writes on stdout.
//     [Process.Kill] ends the child with SIGKILL at the moment the test
//     chooses, and hands control back to the test, which then opens what
//     the child wrote and verifies it. A SIGKILL loses what the process
//     held in memory, but not what it had written to the operating
//     system: the kernel's page cache survives it, so a kill cannot show
//     that a program fails to fsync.
//   - A simulated power loss. [FS] is an in-memory file system for
//     Pebble; [FS.Crash] returns the disk a machine that lost power at
//     that moment would find — what was synced, and none (or a random
//     part) of what was not. A test that opens the store on the crashed
//     copy fails if the store acknowledged a write before syncing it.
//
// The child's protocol is lines on stdout, each written in one unbuffered
// write, so that the parent sees whole lines or, at the kill, one line cut
// short without its newline. A line "ERR …" is a problem the child found
// itself; the parent fails the test with it. The child exits if its stdin
// closes (the parent holds it open), so it never outlives the parent.
package crashtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envChild names, in the child's environment, the test function the child
// is to run as a workload.
const envChild = "LOGBOOK_CRASHTEST_CHILD"

// ChildLimit is how long a child may run before it gives up, reporting
// that it was never killed.
const ChildLimit = 2 * time.Minute

// Spec describes a child process.
type Spec struct {
	// Test is the name of the test function that runs the workload in the
	// child (it begins by calling Child).
	Test string
	// Env holds the workload's parameters, as "NAME=value".
	Env []string
	// Line, if set, receives every whole line the child writes on stdout,
	// without its newline, in order, on one goroutine, until Kill returns.
	// "ERR" lines go to it too.
	Line func(line string)
}

// Process is a running child.
type Process struct {
	t      testing.TB
	spec   Spec
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr bytes.Buffer // read only after Wait
	eof    chan struct{}

	mu      sync.Mutex
	seen    map[string]chan struct{} // closed when a line with that first word came
	errs    []string
	partial string
	killed  bool
}

// Start starts the test binary again as a child running spec.Test. The
// child is killed when the test ends if Kill was not called.
func Start(t testing.TB, spec Spec) *Process {
	t.Helper()
	p := &Process{t: t, spec: spec, eof: make(chan struct{}), seen: make(map[string]chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^"+spec.Test+"$", "-test.count=1", "-test.timeout=0")
	p.cmd.Env = append(append(os.Environ(), envChild+"="+spec.Test), spec.Env...)
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		if !killed {
			_ = p.cmd.Process.Kill()
			<-p.eof
			_ = p.cmd.Wait()
		}
		_ = p.stdin.Close()
	})
	go p.read(stdout)
	return p
}

func (p *Process) read(stdout io.Reader) {
	defer close(p.eof)
	br := bufio.NewReader(stdout)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			p.mu.Lock()
			p.partial = line // no newline: cut short by the kill
			p.mu.Unlock()
			return
		}
		line = strings.TrimSuffix(line, "\n")
		word, rest, _ := strings.Cut(line, " ")
		if word == "ERR" {
			p.mu.Lock()
			p.errs = append(p.errs, rest)
			p.mu.Unlock()
		}
		if p.spec.Line != nil {
			p.spec.Line(line)
		}
		p.mu.Lock()
		c := p.seenLocked(word)
		select {
		case <-c:
		default:
			close(c)
		}
		p.mu.Unlock()
	}
}

func (p *Process) seenLocked(word string) chan struct{} {
	c := p.seen[word]
	if c == nil {
		c = make(chan struct{})
		p.seen[word] = c
	}
	return c
}

// WaitFor waits until the child has written a line whose first word is
// word (and Line has been called with it). It reports false if the child
// ended first, or if patience ran out, which also fails the test.
func (p *Process) WaitFor(word string, patience time.Duration) bool {
	p.t.Helper()
	p.mu.Lock()
	c := p.seenLocked(word)
	p.mu.Unlock()
	select {
	case <-c:
		return true
	case <-p.eof:
		return false
	case <-time.After(patience):
		p.t.Errorf("crash child %s: no %q line in %v", p.spec.Test, word, patience)
		return false
	}
}

// Result is what a killed child left besides its lines.
type Result struct {
	// Partial is the last line the kill cut short, if any.
	Partial string
	// Stderr is everything the child wrote on stderr.
	Stderr string
}

// Kill ends the child with SIGKILL and waits for it to end. It fails the
// test if the child had ended by itself before the kill, or if it wrote
// "ERR" lines. When Kill returns, Line is called no more.
func (p *Process) Kill() Result {
	p.t.Helper()
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Errorf("crash child %s: kill: %v", p.spec.Test, err)
	}
	<-p.eof
	waitErr := p.cmd.Wait()
	res := Result{Partial: p.partial, Stderr: p.stderr.String()}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Errorf("crash child %s ended by itself (%v), not by our SIGKILL; stderr:\n%s", p.spec.Test, waitErr, res.Stderr)
	}
	for _, e := range p.errs {
		p.t.Errorf("crash child %s reported: %s", p.spec.Test, e)
	}
	return res
}

// Out is the child's side of the protocol: its stdout.
type Out struct {
	mu sync.Mutex
}

// Child makes the calling test the child's workload. Run by go test rather
// than by Start, it skips the test. Started by Start, it makes the process
// exit when the parent closes its stdin, or with an "ERR" line after
// ChildLimit, and returns the child's stdout.
func Child(t testing.TB) *Out {
	t.Helper()
	if os.Getenv(envChild) != t.Name() {
		t.Skip("the workload of a crash test; runs only in the child process the test starts")
	}
	out := &Out{}
	go func() { // never outlive the parent, which holds our stdin open
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	time.AfterFunc(ChildLimit, func() { out.Fail("not killed after %v", ChildLimit) })
	return out
}

// Printf writes one line, in one write; the newline is added. If the
// parent is gone, the child exits.
func (o *Out) Printf(format string, args ...any) {
	b := fmt.Appendf(nil, format, args...)
	b = append(b, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := os.Stdout.Write(b); err != nil {
		os.Exit(5)
	}
}

// Fail writes the line "ERR …" and exits: the parent fails the test with
// the message.
func (o *Out) Fail(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " | ")
	o.mu.Lock() // held until exit: no line after this one
	_, _ = os.Stdout.Write([]byte("ERR " + msg + "\n"))
	os.Exit(3)
}
