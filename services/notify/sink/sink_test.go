package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/services/notify"
)

func post(t *testing.T, url string, body []byte) int {
	t.Helper()
	resp, err := http.Post(url+Path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func batch(keys ...string) []byte {
	var b notify.Batch
	for _, k := range keys {
		b.Messages = append(b.Messages, notify.Message{Key: k, Channel: notify.Push, To: []string{"tok"}})
	}
	data, _ := json.Marshal(b)
	return data
}

func TestCountsKeysAndDuplicates(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			keys := make([]string, 100)
			for i := range keys {
				keys[i] = fmt.Sprintf("r/%d/push", g*100+i)
			}
			if st := post(t, srv.URL, batch(keys...)); st != http.StatusNoContent {
				t.Errorf("status %d", st)
			}
		})
	}
	wg.Wait()
	if st := post(t, srv.URL, batch("r/5/push", "r/new/push")); st != http.StatusNoContent {
		t.Fatalf("status %d", st)
	}
	want := Stats{Calls: 9, Messages: 802, UniqueKeys: 801, Duplicates: 1}
	got := s.Stats()
	if got.FirstTakenAt.IsZero() || got.LastNewKeyAt.Before(got.FirstTakenAt) {
		t.Fatalf("first taken at %v, last new key at %v", got.FirstTakenAt, got.LastNewKeyAt)
	}
	want.FirstTakenAt, want.LastNewKeyAt = got.FirstTakenAt, got.LastNewKeyAt
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if s.Count("r/5/push") != 2 || s.Count("r/6/push") != 1 || s.Count("absent") != 0 {
		t.Fatalf("counts per key wrong")
	}

	resp, err := http.Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got = Stats{}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !got.FirstTakenAt.Equal(want.FirstTakenAt) || !got.LastNewKeyAt.Equal(want.LastNewKeyAt) {
		t.Fatalf("GET /stats: %+v, %v", got, err)
	}
	got.FirstTakenAt, got.LastNewKeyAt = want.FirstTakenAt, want.LastNewKeyAt
	if got != want {
		t.Fatalf("GET /stats: %+v, %v", got, err)
	}
}

func TestInjectedFailuresTakeNothing(t *testing.T) {
	s, err := New(Options{ErrorRate: 0.5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ok, failed := 0, 0
	for i := range 200 {
		switch st := post(t, srv.URL, batch(fmt.Sprintf("k%d", i))); st {
		case http.StatusNoContent:
			ok++
		case http.StatusServiceUnavailable:
			failed++
		default:
			t.Fatalf("status %d", st)
		}
	}
	st := s.Stats()
	if failed < 60 || failed > 140 || st.FailedCalls != int64(failed) || st.UniqueKeys != int64(ok) || st.Calls != 200 {
		t.Fatalf("ok %d failed %d stats %+v", ok, failed, st)
	}
}

func TestWaitUniqueAndLastNewKey(t *testing.T) {
	s, _ := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	done := make(chan Stats)
	go func() {
		st, err := s.WaitUnique(context.Background(), 3)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	post(t, srv.URL, batch("a", "b"))
	select {
	case st := <-done:
		t.Fatalf("returned at %d keys, before 3", st.UniqueKeys)
	case <-time.After(20 * time.Millisecond):
	}
	post(t, srv.URL, batch("c"))
	st := <-done
	if st.UniqueKeys != 3 || st.LastNewKeyAt.IsZero() {
		t.Fatalf("stats %+v", st)
	}
	// A batch of keys taken before is a duplicate, not an end of delivery.
	post(t, srv.URL, batch("a"))
	if again := s.Stats(); !again.LastNewKeyAt.Equal(st.LastNewKeyAt) || again.Duplicates != 1 {
		t.Fatalf("a duplicate moved the last new key: %+v, before %+v", again, st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.WaitUnique(ctx, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a key never sent: %v", err)
	}
}

func TestLatency(t *testing.T) {
	s, _ := New(Options{Latency: 50 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	start := time.Now()
	post(t, srv.URL, batch("k"))
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("answered after %v, before the latency of 50ms", d)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(Options{ErrorRate: 1.5}); err == nil {
		t.Fatal("error rate 1.5 accepted")
	}
	s, _ := New(Options{MaxKeys: 2, MaxBody: 1 << 20})
	srv := httptest.NewServer(s)
	defer srv.Close()
	over := make([]string, notify.MaxBatch+1)
	for i := range over {
		over[i] = fmt.Sprint(i)
	}
	cases := []struct {
		name string
		body []byte
		want int
	}{
		{"not json", []byte("{"), http.StatusBadRequest},
		{"unknown field", []byte(`{"msgs":[]}`), http.StatusBadRequest},
		{"empty batch", batch(), http.StatusBadRequest},
		{"over 500", batch(over...), http.StatusBadRequest},
		{"no key", batch(""), http.StatusBadRequest},
		{"too large", []byte(`{"messages":[{"key":"` + strings.Repeat("x", 2<<20) + `"}]}`), http.StatusRequestEntityTooLarge},
		{"too many keys", batch("a", "b", "c"), http.StatusInsufficientStorage},
	}
	for _, c := range cases {
		if st := post(t, srv.URL, c.body); st != c.want {
			t.Errorf("%s: status %d, want %d", c.name, st, c.want)
		}
	}
	if st := s.Stats(); st.Messages != 0 {
		t.Fatalf("bad input taken: %+v", st)
	}
}
