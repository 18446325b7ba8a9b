package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestLateCommitsAreNotSkipped is the failure of sequence-based stores
// (akka-persistence-jdbc, Marten, Axon): a writer that took its number
// early and commits late lands behind a reader's cursor. Here many writers
// on two processes commit in random order, one of them holds its
// transaction open while the others commit, and subscribers on both
// processes follow the log from the start. Each must see every
// acknowledged event exactly once, at gap-free positions, whole appends
// together, each stream in order.
func TestLateCommitsAreNotSkipped(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	var slowOnce sync.Once
	slowStarted := make(chan struct{})
	release := make(chan struct{})
	delay := func(ctx context.Context, stream string) error {
		if stream == "slow" {
			held := false
			slowOnce.Do(func() { held = true })
			if held {
				close(slowStarted)
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				return nil
			}
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		return nil
	}
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 24, beforeCommit: delay})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 24, NoSequencer: true, beforeCommit: delay})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// The slow append starts first and commits last.
	slowRes := make(chan eventstore.AppendResult, 1)
	go func() {
		res, err := b.Append(context.Background(), "slow", eventstore.NoStream, evs(3, "slow"))
		if err != nil {
			t.Errorf("slow append: %v", err)
		}
		slowRes <- res
	}()
	<-slowStarted

	const writers, appends = 16, 40
	var mu sync.Mutex
	var acked []eventstore.AppendResult
	var wg sync.WaitGroup
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for i := range appends {
				stream := fmt.Sprintf("s-%d", rand.IntN(6))
				res, err := s.Append(context.Background(), stream, eventstore.Any, evs(1+i%3, "w"))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				acked = append(acked, res)
				mu.Unlock()
			}
		})
	}

	type seen struct {
		events []eventstore.Event
		err    error
	}
	follow := func(s *Store, want int) <-chan seen {
		out := make(chan seen, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sub, err := s.Subscribe(ctx, eventstore.All(), 1)
			if err != nil {
				out <- seen{err: err}
				return
			}
			defer sub.Close()
			var got []eventstore.Event
			for len(got) < want {
				batch, err := sub.Next(ctx)
				if err != nil {
					out <- seen{got, err}
					return
				}
				got = append(got, batch...)
			}
			out <- seen{events: got}
		}()
		return out
	}
	total := 3
	for i := range appends {
		total += writers * (1 + i%3)
	}
	subA, subB := follow(a, total), follow(b, total)

	wg.Wait()
	headBefore, err := a.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	slow := <-slowRes
	if slow.FirstPosition <= headBefore {
		t.Errorf("the late append got positions %d..%d, at or behind the head %d that readers had already passed", slow.FirstPosition, slow.LastPosition, headBefore)
	}
	acked = append(acked, slow)

	for name, ch := range map[string]<-chan seen{"process a": subA, "process b": subB} {
		r := <-ch
		if r.err != nil {
			t.Fatalf("%s: subscription after %d events: %v", name, len(r.events), r.err)
		}
		checkLog(t, name, r.events, acked)
	}
}

// checkLog checks a log read from the start against the acknowledged
// appends.
func checkLog(t *testing.T, name string, log []eventstore.Event, acked []eventstore.AppendResult) {
	t.Helper()
	want := 0
	for _, r := range acked {
		want += int(r.LastSeq - r.FirstSeq + 1)
	}
	if len(log) != want {
		t.Fatalf("%s: %d events, want %d", name, len(log), want)
	}
	ids := make(map[eventstore.ID]bool)
	lastSeq := make(map[string]uint64)
	for i, ev := range log {
		if ev.Position != uint64(i+1) {
			t.Fatalf("%s: event %d has position %d: a gap or a repeat", name, i, ev.Position)
		}
		if ids[ev.ID] {
			t.Fatalf("%s: id %s twice", name, ev.ID)
		}
		ids[ev.ID] = true
		if ev.Seq != lastSeq[ev.Stream]+1 {
			t.Fatalf("%s: stream %s seq %d after %d", name, ev.Stream, ev.Seq, lastSeq[ev.Stream])
		}
		lastSeq[ev.Stream] = ev.Seq
	}
	for _, r := range acked {
		for p := r.FirstPosition; p <= r.LastPosition; p++ {
			ev := log[p-1]
			if ev.Stream != r.Stream || ev.Seq != r.FirstSeq+(p-r.FirstPosition) {
				t.Fatalf("%s: append %+v: position %d holds %s/%d", name, r, p, ev.Stream, ev.Seq)
			}
		}
		if r.LastPosition-r.FirstPosition != r.LastSeq-r.FirstSeq {
			t.Fatalf("%s: append %+v is not contiguous in the log", name, r)
		}
	}
}

func evs(n int, typ string) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, n)
	for i := range out {
		out[i] = eventstore.NewEvent{Type: typ, Tags: []string{typ}, Data: fmt.Appendf(nil, "%s %d", typ, i)}
	}
	return out
}

// TestSequencerFailover closes the process that sequences; the other one
// must take over, and appends made meanwhile complete.
func TestSequencerFailover(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	open := func() *Store {
		s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	if _, err := a.Append(t.Context(), "x", eventstore.NoStream, evs(2, "x")); err != nil {
		t.Fatal(err)
	}
	leader, other := a, b
	deadline := time.Now().Add(10 * time.Second)
	for !a.Sequencing() && !b.Sequencing() {
		if time.Now().After(deadline) {
			t.Fatal("no process became the sequencer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.Sequencing() {
		leader, other = b, a
	}
	if leader.Sequencing() == other.Sequencing() {
		t.Fatal("both processes sequence at once")
	}
	// An append waiting for positions when the sequencer goes away.
	done := make(chan error, 1)
	go func() {
		_, err := other.Append(context.Background(), "x", eventstore.Exactly(2), evs(1, "x"))
		done <- err
	}()
	leader.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("append across the failover: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("append did not complete after the sequencer closed")
	}
	res, err := other.Append(t.Context(), "x", eventstore.Exactly(3), evs(1, "x"))
	if err != nil || res.LastPosition != 4 {
		t.Fatalf("append after failover: %+v, %v; want position 4", res, err)
	}
	if !other.Sequencing() {
		t.Error("the remaining process does not sequence")
	}
}

// TestExclusive: of two processes, one runs the function at a time, and
// the other takes over when the first stops.
func TestExclusive(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	var running, peak, runs, holder atomic.Int32
	work := func(i int32) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			runs.Add(1)
			holder.Store(i)
			n := running.Add(1)
			defer running.Add(-1)
			for {
				if p := peak.Load(); n > p {
					peak.CompareAndSwap(p, n)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
	cancels := make([]context.CancelFunc, 2)
	done := make([]chan struct{}, 2)
	for i := range 2 {
		s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i], done[i] = cancel, make(chan struct{})
		go func() { defer close(done[i]); _ = s.Exclusive(ctx, "job", work(int32(i))) }()
	}
	time.Sleep(500 * time.Millisecond)
	if runs.Load() != 1 || peak.Load() != 1 {
		t.Fatalf("%d runs, %d at once; want one", runs.Load(), peak.Load())
	}
	first := holder.Load()
	cancels[first]()
	<-done[first]
	deadline := time.Now().Add(5 * time.Second)
	for holder.Load() == first || running.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the other process did not take over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancels[1-first]()
	<-done[1-first]
	if peak.Load() != 1 || runs.Load() != 2 {
		t.Fatalf("%d runs, %d at once; want two, one at a time", runs.Load(), peak.Load())
	}
}

// TestConflictWaitsForTheWinner: a conflict reported while the append
// that won is committed but not yet sequenced returns only once that
// append is readable, so a caller that reloads the stream on a conflict
// finds what beat it.
func TestConflictWaitsForTheWinner(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, NoSequencer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	won := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "s", eventstore.NoStream, evs(1, "first"))
		won <- err
	}()
	for {
		names, err := a.ListStreams(t.Context(), "", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 1 {
			break // committed, and with no sequencer, not readable
		}
		time.Sleep(10 * time.Millisecond)
	}
	lost := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "s", eventstore.NoStream, evs(1, "second"))
		lost <- err
	}()
	select {
	case err := <-lost:
		t.Fatalf("the conflict returned before the winner was readable: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	err = <-lost
	var ce *eventstore.ConflictError
	if !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("second append: %v, want a conflict at version 1", err)
	}
	got, err := a.ReadStream(t.Context(), "s", 1, 10)
	if err != nil || len(got) != 1 || got[0].Type != "first" {
		t.Fatalf("after the conflict the stream reads %v, %v; want the winner", got, err)
	}
}

// TestAppendAcrossStretches: the follower announces the log in stretches
// of 10,000 positions; an append that one cuts in two must still be
// answered with all of its positions.
func TestAppendAcrossStretches(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, NoSequencer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	type answer struct {
		res eventstore.AppendResult
		err error
	}
	answers := make(chan answer, 2)
	for _, n := range []int{9995, 10} {
		events := evs(n, fmt.Sprint(n))
		go func() {
			res, err := a.Append(context.Background(), fmt.Sprint("s", n), eventstore.NoStream, events)
			answers <- answer{res, err}
		}()
		for { // one after the other, so that the sequencer orders them so
			names, err := a.ListStreams(t.Context(), "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(names, fmt.Sprint("s", n)) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Both wait for a sequencer; this one positions them in one pass.
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 2 {
		ans := <-answers
		if ans.err != nil {
			t.Fatal(ans.err)
		}
		r := ans.res
		if r.LastPosition-r.FirstPosition != r.LastSeq-r.FirstSeq {
			t.Errorf("append to %s: positions %d..%d for seqs %d..%d", r.Stream, r.FirstPosition, r.LastPosition, r.FirstSeq, r.LastSeq)
		}
		if r.Stream == "s10" && (r.FirstPosition != 9996 || r.LastPosition != 10005) {
			t.Errorf("append to s10: positions %d..%d, want 9996..10005", r.FirstPosition, r.LastPosition)
		}
	}
}

// TestProgress: saved positions only move forward, per name.
func TestProgress(t *testing.T) {
	s, err := Open(t.Context(), testenv.URL(t), Options{Schema: testenv.Schema(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, step := range []struct {
		save, want uint64
	}{{0, 0}, {10, 10}, {5, 10}, {12, 12}} {
		if step.save > 0 {
			if err := s.SaveProgress(t.Context(), "pub", step.save); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.LoadProgress(t.Context(), "pub"); err != nil || got != step.want {
			t.Fatalf("after saving %d: %d, %v; want %d", step.save, got, err, step.want)
		}
		// The same position through a Progress value.
		if got, err := s.Progress("pub").Load(t.Context()); err != nil || got != step.want {
			t.Fatalf("Progress.Load after saving %d: %d, %v; want %d", step.save, got, err, step.want)
		}
	}
	if got, _ := s.LoadProgress(t.Context(), "other"); got != 0 {
		t.Fatalf("another name: %d", got)
	}
	p := s.Progress("other")
	if err := p.Save(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadProgress(t.Context(), "other"); got != 7 {
		t.Fatalf("Progress.Save saved %d under its name, want 7", got)
	}
}
