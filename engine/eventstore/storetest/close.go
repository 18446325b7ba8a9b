package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

func closeTests() []testCase {
	return []testCase{
		{"UseAfterClose", testUseAfterClose},
		{"CloseUnderLoad", testCloseUnderLoad},
	}
}

// afterClose lists the store's calls other than Append, for use on a
// closed store: each must fail rather than panic or block.
func afterClose(s eventstore.Store) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"ReadStream": func(ctx context.Context) error {
			_, err := s.ReadStream(ctx, "a", 1, 10)
			return err
		},
		"ReadStreamBackward": func(ctx context.Context) error {
			_, err := s.ReadStreamBackward(ctx, "a", 0, 10)
			return err
		},
		"ReadAll": func(ctx context.Context) error {
			_, err := s.ReadAll(ctx, 1, 10)
			return err
		},
		"ReadAll past the head": func(ctx context.Context) error {
			_, err := s.ReadAll(ctx, 1000, 10)
			return err
		},
		"ReadTag": func(ctx context.Context) error {
			_, err := s.ReadTag(ctx, "t", 1, 10)
			return err
		},
		"ListStreams": func(ctx context.Context) error {
			_, err := s.ListStreams(ctx, "", 10)
			return err
		},
		"StreamVersion": func(ctx context.Context) error {
			_, err := s.StreamVersion(ctx, "a")
			return err
		},
		"SaveSnapshot": func(ctx context.Context) error {
			return s.SaveSnapshot(ctx, eventstore.Snapshot{Stream: "a", Seq: 1})
		},
		"LoadSnapshot": func(ctx context.Context) error {
			_, _, err := s.LoadSnapshot(ctx, "a")
			return err
		},
	}
}

func testUseAfterClose(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.NoStream, evs("e", 3, "t")...)
	if err := s.SaveSnapshot(t.Context(), eventstore.Snapshot{Stream: "a", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Append(t.Context(), "a", eventstore.Any, evs("late", 1))
	wantErrIs(t, "Append after Close", err, eventstore.ErrClosed)
	_, err = s.Append(t.Context(), "new", eventstore.NoStream, evs("late", 1))
	wantErrIs(t, "Append after Close", err, eventstore.ErrClosed)
	for name, call := range afterClose(s) {
		if err := call(t.Context()); err == nil {
			t.Errorf("%s after Close: no error", name)
		}
	}
	sub, err := s.Subscribe(t.Context(), eventstore.All(), 1)
	if err == nil {
		r := await(t, "Next of a subscription made after Close", nextAsync(t.Context(), sub))
		if !errors.Is(r.err, eventstore.ErrClosed) {
			t.Errorf("Next of a subscription made after Close: %d events, %v; want ErrClosed", len(r.events), r.err)
		}
		_ = sub.Close()
	}
	_ = s.Close() // closing twice must be harmless
}

// testCloseUnderLoad closes the store while writers, readers and
// subscribers are busy: each of their calls either succeeds or fails, none
// panics or hangs, and appends acknowledged before Close were complete.
func testCloseUnderLoad(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.NoStream, evs("e", 3, "t")...)
	var errs errorList
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	started := make(chan struct{}, 8)
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				res, err := s.Append(ctx, fmt.Sprintf("w-%d", w), eventstore.Any, evs("e", 1+i%4, "t"))
				if i == 0 {
					started <- struct{}{}
				}
				if err != nil {
					if !errors.Is(err, eventstore.ErrClosed) {
						errs.add(fmt.Errorf("writer %d: Append during Close: %w, want ErrClosed", w, err))
					}
					return
				}
				if n := uint64(1 + i%4); res.LastSeq-res.FirstSeq+1 != n {
					errs.add(fmt.Errorf("writer %d: result %+v for %d events", w, res, n))
				}
			}
		})
	}
	for r := range 2 {
		wg.Go(func() {
			calls := afterClose(s)
			for i := 0; ; i++ {
				failed := false
				for _, call := range calls {
					if call(ctx) != nil {
						failed = true
					}
				}
				if i == 0 {
					started <- struct{}{}
				}
				if failed {
					return // closed (an open store would not fail these)
				}
				if ctx.Err() != nil {
					errs.add(fmt.Errorf("reader %d: still reading without error after the timeout", r))
					return
				}
			}
		})
	}
	for _, f := range []eventstore.Filter{eventstore.All(), eventstore.Tagged("t"), eventstore.OfStream("w-0")} {
		sub := subscribe(t, s, f, 1)
		wg.Go(func() {
			started <- struct{}{}
			for {
				evs, err := sub.Next(ctx)
				if err != nil {
					if !errors.Is(err, eventstore.ErrClosed) {
						errs.add(fmt.Errorf("%v: Next during Close: %w, want ErrClosed", f, err))
					}
					return
				}
				if len(evs) == 0 {
					errs.add(fmt.Errorf("%v: Next returned no events and no error", f))
					return
				}
			}
		})
	}
	for range 8 {
		<-started
	}
	time.Sleep(10 * time.Millisecond) // let them get going
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close under load: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close under load did not return")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("calls in flight during Close did not return")
	}
	errs.report(t)
}
