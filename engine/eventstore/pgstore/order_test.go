package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
// on two processes commit with random delays, one of them holds its
// transaction open for a while, and subscribers on both processes follow
// the log from the start. Each must see every acknowledged event exactly
// once, at gap-free positions, whole appends together, each stream in
// order; and the held append's positions come after every head a reader
// saw while it was held.
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
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 24, beforeCommit: delay})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	const writers, appends = 16, 40
	var mu sync.Mutex
	var acked []eventstore.AppendResult
	var wg sync.WaitGroup
	write := func(w int) {
		s := a
		if w%2 == 1 {
			s = b
		}
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
	}
	// Half the writers write before the slow append, half after.
	for w := range writers / 2 {
		wg.Go(func() { write(w) })
	}
	time.Sleep(20 * time.Millisecond)
	slowRes := make(chan eventstore.AppendResult, 1)
	go func() {
		res, err := b.Append(context.Background(), "slow", eventstore.NoStream, evs(3, "slow"))
		if err != nil {
			t.Errorf("slow append: %v", err)
		}
		slowRes <- res
	}()
	<-slowStarted
	for w := writers / 2; w < writers; w++ {
		wg.Go(func() { write(w) })
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

	// While the slow append is held, readers on both processes see some
	// head; it must not have passed the slow append's place.
	var headsSeen uint64
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		for _, s := range []*Store{a, b} {
			h, err := s.Head(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			headsSeen = max(headsSeen, h)
		}
	}
	close(release)
	slow := <-slowRes
	wg.Wait()
	if slow.FirstPosition <= headsSeen {
		t.Errorf("the late append got positions %d..%d, at or behind the head %d that readers had already seen", slow.FirstPosition, slow.LastPosition, headsSeen)
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

// TestWriterDiesHoldingTheHead: a process that dies inside its append's
// transaction, holding the head's lock, holds up the appends of the other
// processes only until PostgreSQL ends its session; then they complete,
// and the dead process's append is not in the log.
func TestWriterDiesHoldingTheHead(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	held := make(chan struct{})
	hold := func(ctx context.Context, stream string) error {
		close(held)
		<-ctx.Done() // until the store closes
		return ctx.Err()
	}
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, beforeCommit: hold})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Append(t.Context(), "x", eventstore.NoStream, evs(2, "x")); err != nil {
		t.Fatal(err)
	}
	dead := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "dead", eventstore.NoStream, evs(5, "dead"))
		dead <- err
	}()
	<-held
	done := make(chan error, 1)
	go func() {
		_, err := b.Append(context.Background(), "x", eventstore.Exactly(2), evs(1, "x"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an append completed while another process held the head: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The holder's session ends as a dead process's would. The waiter
	// holds the head's tuple lock while it waits for the holder.
	var killed int
	if err := b.Pool().QueryRow(t.Context(), `SELECT count(pg_terminate_backend(h))
		FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace,
			unnest(pg_blocking_pids(l.pid)) AS h
		WHERE n.nspname = $1 AND c.relname = 'head' AND l.locktype = 'tuple'`, schema).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("ended %d sessions holding the head, %v; want 1", killed, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("append after the holder died: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("append did not complete after the holder died")
	}
	a.Close() // ends the hook, which stands for the dead process
	if err := <-dead; err == nil {
		t.Fatal("the dead process's append was acknowledged")
	}
	res, err := b.Append(t.Context(), "x", eventstore.Exactly(3), evs(1, "x"))
	if err != nil || res.FirstPosition != 4 || res.LastPosition != 4 {
		t.Fatalf("append after the holder died: %+v, %v; want position 4", res, err)
	}
	got, err := b.ReadStream(t.Context(), "dead", 1, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("the dead append's stream reads %v, %v; want nothing", got, err)
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

// TestConflictWaitsForTheWinner: an append that conflicts with one still
// committing is answered only once the winner has committed, so a caller
// that reloads the stream on a conflict finds what beat it.
func TestConflictWaitsForTheWinner(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, stream string) error {
		once.Do(func() {
			close(held)
			<-release
		})
		return nil
	}
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, beforeCommit: hold})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	won := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "s", eventstore.NoStream, evs(1, "first"))
		won <- err
	}()
	<-held
	lost := make(chan error, 1)
	go func() {
		_, err := b.Append(context.Background(), "s", eventstore.NoStream, evs(1, "second"))
		lost <- err
	}()
	select {
	case err := <-lost:
		t.Fatalf("the conflict returned before the winner committed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	err = <-lost
	var ce *eventstore.ConflictError
	if !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("second append: %v, want a conflict at version 1", err)
	}
	got, err := b.ReadStream(t.Context(), "s", 1, 10)
	if err != nil || len(got) != 1 || got[0].Type != "first" {
		t.Fatalf("after the conflict the stream reads %v, %v; want the winner", got, err)
	}
}

// TestFollowInStretches: a process follows what another writes in
// stretches of 10,000 positions; an append that one cuts in two is read
// whole, and the writer's answers carry contiguous positions.
func TestFollowInStretches(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sub, err := b.Subscribe(t.Context(), eventstore.OfStream("s10"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var acked []eventstore.AppendResult
	for _, n := range []int{9995, 10} {
		r, err := a.Append(t.Context(), fmt.Sprint("s", n), eventstore.NoStream, evs(n, fmt.Sprint(n)))
		if err != nil {
			t.Fatal(err)
		}
		if r.LastPosition-r.FirstPosition != r.LastSeq-r.FirstSeq {
			t.Errorf("append to %s: positions %d..%d for seqs %d..%d", r.Stream, r.FirstPosition, r.LastPosition, r.FirstSeq, r.LastSeq)
		}
		acked = append(acked, r)
	}
	if r := acked[1]; r.FirstPosition != 9996 || r.LastPosition != 10005 {
		t.Errorf("append to s10: positions %d..%d, want 9996..10005", r.FirstPosition, r.LastPosition)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []eventstore.Event
	for len(got) < 10 {
		batch, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription on the other process after %d events: %v", len(got), err)
		}
		got = append(got, batch...)
	}
	if got[0].Position != 9996 || got[9].Position != 10005 {
		t.Fatalf("the other process read positions %d..%d", got[0].Position, got[9].Position)
	}
	var all []eventstore.Event
	for from := uint64(1); ; {
		batch, err := b.ReadAll(t.Context(), from, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) == 0 {
			break
		}
		all = append(all, batch...)
		from = batch[len(batch)-1].Position + 1
	}
	checkLog(t, "process b", all, acked)
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

// TestSchemaDroppedStopsFollower: a store whose schema is dropped under
// it stops polling the missing tables (PostgreSQL's log filled with
// "relation head does not exist" otherwise), and appends say why.
func TestSchemaDroppedStopsFollower(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 4, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Changed(eventstore.All()) // a wait for new events starts the follower
	if _, err := s.Append(t.Context(), "x", eventstore.NoStream, evs(1, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(t.Context(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.followed:
	case <-time.After(5 * time.Second):
		t.Fatal("the follower still runs after its schema was dropped")
	}
	if _, err := s.Append(t.Context(), "x", eventstore.Exactly(1), evs(1, "x")); err == nil {
		t.Fatal("an append into a dropped schema succeeded")
	}
}
