// Package kvtest is the conformance suite of the kv repository's backends:
// every backend's tests call Run with a function that opens a fresh, empty
// one.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/logbook/logbook/services/kv"
)

// Options size the suite's concurrent tests.
type Options struct {
	// Contenders clients make ContendedUpdates compare-and-set attempts
	// each on one key (defaults 64 × 300; the full size, 64 × 10,000, runs
	// with LOGBOOK_KV_FULL=1 through Full).
	Contenders       int
	ContendedUpdates int
	// LinearClients clients run LinearOps operations each for the
	// linearizability check (defaults 16 × 200).
	LinearClients int
	LinearOps     int
}

// Run runs the suite. open returns an empty backend; the suite closes it.
func Run(t *testing.T, open func(t *testing.T) kv.Backend, o Options) {
	if o.Contenders <= 0 {
		o.Contenders = 64
	}
	if o.ContendedUpdates <= 0 {
		o.ContendedUpdates = 300
	}
	if o.LinearClients <= 0 {
		o.LinearClients = 16
	}
	if o.LinearOps <= 0 {
		o.LinearOps = 200
	}
	repo := func(t *testing.T) *kv.Repository {
		r := kv.New(open(t), kv.Limits{MaxValueBytes: 1 << 20, MaxBatchItems: 1000})
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	t.Run("Absent", func(t *testing.T) { testAbsent(t, repo(t)) })
	t.Run("Matching", func(t *testing.T) { testMatching(t, repo(t)) })
	t.Run("Stale", func(t *testing.T) { testStale(t, repo(t)) })
	t.Run("Cascade", func(t *testing.T) { testCascade(t, repo(t)) })
	t.Run("Batch", func(t *testing.T) { testBatch(t, repo(t)) })
	t.Run("Values", func(t *testing.T) { testValues(t, repo(t)) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, repo(t)) })
	t.Run("Typed", func(t *testing.T) { testTyped(t, repo(t)) })
	t.Run("Streams", func(t *testing.T) {
		r := kv.New(open(t), kv.Limits{MaxValueBytes: streamLimit})
		t.Cleanup(func() { _ = r.Close() })
		testStreams(t, r)
	})
	t.Run("ContendedCAS", func(t *testing.T) { testContended(t, repo(t), o.Contenders, o.ContendedUpdates) })
	t.Run("Linearizable", func(t *testing.T) { testLinearizable(t, repo(t), o.LinearClients, o.LinearOps) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

func testAbsent(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	if _, ok, err := r.Get(c, "a"); err != nil || ok {
		t.Fatalf("Get absent: ok=%v err=%v", ok, err)
	}
	if _, m, err := r.GetIfNotMatched(c, "a", 1); err != nil || m != kv.Absent {
		t.Fatalf("GetIfNotMatched absent: %v %v", m, err)
	}
	if ok, err := r.Exist(c, "a"); err != nil || ok {
		t.Fatalf("Exist absent: %v %v", ok, err)
	}
	_, err := r.Update(c, "a", 1, []byte("x"))
	wantErr(t, err, kv.ErrNotFound)
	wantErr(t, r.Delete(c, "a", 1), kv.ErrNotFound)
	must(t, r.Add(c, "a", []byte("x")))
	e, ok, err := r.Get(c, "a")
	if err != nil || !ok || e.Version != 1 || string(e.Value) != "x" || e.ID != "a" {
		t.Fatalf("Get after Add: %+v %v %v", e, ok, err)
	}
}

func testMatching(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	must(t, r.Add(c, "k", []byte("v1")))
	wantErr(t, r.Add(c, "k", []byte("again")), kv.ErrExists)
	if _, m, err := r.GetIfNotMatched(c, "k", 1); err != nil || m != kv.NotModified {
		t.Fatalf("GetIfNotMatched at current version: %v %v", m, err)
	}
	v, err := r.Update(c, "k", 1, []byte("v2"))
	if err != nil || v != 2 {
		t.Fatalf("Update: %d %v", v, err)
	}
	e, m, err := r.GetIfNotMatched(c, "k", 1)
	if err != nil || m != kv.Modified || e.Version != 2 || string(e.Value) != "v2" {
		t.Fatalf("GetIfNotMatched at old version: %+v %v %v", e, m, err)
	}
	if ok, err := r.Exist(c, "k"); err != nil || !ok {
		t.Fatalf("Exist: %v %v", ok, err)
	}
	must(t, r.Delete(c, "k", 2))
	if _, ok, err := r.Get(c, "k"); err != nil || ok {
		t.Fatalf("Get after Delete: %v %v", ok, err)
	}
	// Added again, a key starts over at version 1.
	must(t, r.Add(c, "k", []byte("new")))
	if e, _, _ := r.Get(c, "k"); e.Version != 1 || string(e.Value) != "new" {
		t.Fatalf("re-added: %+v", e)
	}
}

func testStale(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	must(t, r.Add(c, "k", []byte("v1")))
	_, err := r.Update(c, "k", 1, []byte("v2"))
	must(t, err)
	for _, stale := range []uint64{1, 3, 1 << 40} {
		_, err = r.Update(c, "k", stale, []byte("lost"))
		var se *kv.StaleError
		if !errors.As(err, &se) || !errors.Is(err, kv.ErrStale) || se.Current != 2 || se.Expected != stale {
			t.Fatalf("Update at %d: %v", stale, err)
		}
		err = r.Delete(c, "k", stale)
		if !errors.As(err, &se) || se.Current != 2 {
			t.Fatalf("Delete at %d: %v", stale, err)
		}
	}
	if e, _, _ := r.Get(c, "k"); e.Version != 2 || string(e.Value) != "v2" {
		t.Fatalf("a stale write changed the entry: %+v", e)
	}
}

func testCascade(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	for _, id := range []string{"a", "a/b", "a/b/c", "a/d", "ab", "a0", "a.b", "b", "a/b0"} {
		must(t, r.Add(c, id, []byte(id)))
	}
	// A child may exist without its parent, and goes with an ancestor.
	must(t, r.Add(c, "x/y", []byte("orphan")))
	must(t, r.Delete(c, "a/b", 1))
	for id, want := range map[string]bool{"a": true, "a/b": false, "a/b/c": false, "a/b0": true, "a/d": true, "ab": true} {
		if ok, err := r.Exist(c, id); err != nil || ok != want {
			t.Fatalf("after Delete(a/b): Exist(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	must(t, r.Delete(c, "a", 1))
	for id, want := range map[string]bool{"a": false, "a/d": false, "a/b0": false, "ab": true, "a0": true, "a.b": true, "b": true, "x/y": true} {
		if ok, err := r.Exist(c, id); err != nil || ok != want {
			t.Fatalf("after Delete(a): Exist(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	// Children added again after the cascade are new keys.
	must(t, r.Add(c, "a/d", []byte("again")))
	if e, _, _ := r.Get(c, "a/d"); e.Version != 1 {
		t.Fatalf("re-added child: %+v", e)
	}
}

func testBatch(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	items := make([]kv.Item, 100)
	for i := range items {
		items[i] = kv.Item{ID: fmt.Sprintf("b/%03d", i), Value: []byte(strconv.Itoa(i))}
	}
	must(t, r.AddBatch(c, items))
	// One existing key fails the whole batch, and says which.
	err := r.AddBatch(c, []kv.Item{{ID: "new1", Value: nil}, {ID: "b/050"}, {ID: "new2"}})
	var be *kv.BatchError
	if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, kv.ErrExists) {
		t.Fatalf("AddBatch with an existing key: %v", err)
	}
	if ok, _ := r.Exist(c, "new1"); ok {
		t.Fatal("a failed batch wrote its first item")
	}
	for i := range items {
		items[i].Version = 1
		items[i].Value = []byte("u" + strconv.Itoa(i))
	}
	vs, err := r.UpdateBatch(c, items)
	must(t, err)
	if len(vs) != len(items) || vs[0] != 2 || vs[99] != 2 {
		t.Fatalf("UpdateBatch versions: %v", vs)
	}
	for i := range items {
		items[i].Version = 2
	}
	items[42].Version = 1 // stale
	_, err = r.UpdateBatch(c, items)
	if !errors.As(err, &be) || be.Index != 42 || !errors.Is(err, kv.ErrStale) {
		t.Fatalf("UpdateBatch with a stale item: %v", err)
	}
	if e, _, _ := r.Get(c, "b/000"); e.Version != 2 || string(e.Value) != "u0" {
		t.Fatalf("a failed update batch wrote: %+v", e)
	}
	_, err = r.UpdateBatch(c, []kv.Item{{ID: "b/001", Version: 2}, {ID: "nope", Version: 1}})
	if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("UpdateBatch with an absent item: %v", err)
	}
}

func testValues(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, (1<<20)/4) // exactly the limit
	must(t, r.Add(c, "big", big))
	must(t, r.Add(c, "empty", nil))
	must(t, r.Add(c, "ünï/cödé ☃", []byte{0}))
	if e, ok, err := r.Get(c, "big"); err != nil || !ok || !bytes.Equal(e.Value, big) {
		t.Fatalf("big value: ok=%v err=%v len=%d", ok, err, len(e.Value))
	}
	if e, ok, err := r.Get(c, "empty"); err != nil || !ok || len(e.Value) != 0 {
		t.Fatalf("empty value: %+v %v %v", e, ok, err)
	}
	if e, ok, _ := r.Get(c, "ünï/cödé ☃"); !ok || !bytes.Equal(e.Value, []byte{0}) {
		t.Fatalf("unicode id: %+v", e)
	}
}

// streamLimit is the Streams test's value limit: over pebblekv's 1 MiB
// threshold, so a streamed value there goes to a file of its own.
const streamLimit = 3 << 20

// brokenReader gives n bytes, then fails.
type brokenReader struct{ n int }

var errBroken = errors.New("kvtest: the stream broke")

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, errBroken
	}
	n := min(len(p), b.n)
	clear(p[:n])
	b.n -= n
	return n, nil
}

// testStreams: values put from a stream (AddFrom, UpdateFrom) are stored
// as Add and Update store them, with the same versions and failures; a
// stream over the limit is a *TooLargeError and one that fails to read a
// *SourceError, and neither leaves a key behind.
func testStreams(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	small := []byte("small value")
	big := bytes.Repeat([]byte{7, 0, 0xfe, 3}, streamLimit/4) // exactly the limit
	must(t, r.AddFrom(c, "s/small", bytes.NewReader(small)))
	must(t, r.AddFrom(c, "s/big", bytes.NewReader(big[:5<<19])))
	if e, ok, err := r.Get(c, "s/small"); err != nil || !ok || e.Version != 1 || !bytes.Equal(e.Value, small) {
		t.Fatalf("small streamed value: %v %v %d bytes", ok, err, len(e.Value))
	}
	if e, ok, err := r.Get(c, "s/big"); err != nil || !ok || e.Version != 1 || !bytes.Equal(e.Value, big[:5<<19]) {
		t.Fatalf("large streamed value: %v %v %d bytes", ok, err, len(e.Value))
	}
	wantErr(t, r.AddFrom(c, "s/big", bytes.NewReader(small)), kv.ErrExists)
	v, err := r.UpdateFrom(c, "s/big", 1, bytes.NewReader(big))
	if err != nil || v != 2 {
		t.Fatalf("UpdateFrom: %d %v", v, err)
	}
	rd, ok, err := r.Open(c, "s/big")
	if err != nil || !ok {
		t.Fatalf("Open: %v %v", ok, err)
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(rd)
	_ = rd.Close()
	if err != nil || rd.Version != 2 || rd.Size != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("the updated value, read as a stream: version %d, size %d, %d bytes read, %v", rd.Version, rd.Size, got.Len(), err)
	}
	_, err = r.UpdateFrom(c, "s/big", 1, bytes.NewReader(small))
	wantErr(t, err, kv.ErrStale)
	_, err = r.UpdateFrom(c, "s/none", 1, bytes.NewReader(small))
	wantErr(t, err, kv.ErrNotFound)

	over := append(big, 1)
	err = r.AddFrom(c, "s/over", bytes.NewReader(over))
	var tl *kv.TooLargeError
	if !errors.As(err, &tl) || tl.Max != streamLimit {
		t.Fatalf("a stream of %d bytes, over the limit of %d: %v", len(over), streamLimit, err)
	}
	_, err = r.UpdateFrom(c, "s/big", 2, bytes.NewReader(over))
	if !errors.As(err, &tl) {
		t.Fatalf("an update from a stream over the limit: %v", err)
	}
	err = r.AddFrom(c, "s/broken", &brokenReader{n: 2 << 20})
	var se *kv.SourceError
	if !errors.As(err, &se) || !errors.Is(err, errBroken) {
		t.Fatalf("a stream that broke: %v", err)
	}
	for _, id := range []string{"s/over", "s/broken"} {
		if _, ok, err := r.Get(c, id); err != nil || ok {
			t.Fatalf("%s after a failed AddFrom: ok=%v err=%v", id, ok, err)
		}
	}
	if e, _, err := r.Get(c, "s/big"); err != nil || e.Version != 2 || !bytes.Equal(e.Value, big) {
		t.Fatalf("s/big after failed updates: version %d, %v", e.Version, err)
	}
}

func testBadInput(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	for _, id := range []string{"", "/a", "a/", "a//b", "/", "a\x00b", "a\nb", "\xff", strings.Repeat("x", 513)} {
		wantErr(t, r.Add(c, id, nil), kv.ErrInvalid)
		_, _, err := r.Get(c, id)
		wantErr(t, err, kv.ErrInvalid)
		_, err = r.Update(c, id, 1, nil)
		wantErr(t, err, kv.ErrInvalid)
		wantErr(t, r.Delete(c, id, 1), kv.ErrInvalid)
	}
	wantErr(t, r.Add(c, "k", make([]byte, 1<<20+1)), kv.ErrInvalid)
	must(t, r.Add(c, "k", nil))
	_, err := r.Update(c, "k", 1, make([]byte, 1<<20+1))
	wantErr(t, err, kv.ErrInvalid)
	_, err = r.Update(c, "k", 0, nil)
	wantErr(t, err, kv.ErrInvalid)
	wantErr(t, r.Delete(c, "k", 0), kv.ErrInvalid)
	wantErr(t, r.AddBatch(c, nil), kv.ErrInvalid)
	wantErr(t, r.AddBatch(c, make([]kv.Item, 1001)), kv.ErrInvalid)
	wantErr(t, r.AddBatch(c, []kv.Item{{ID: "d"}, {ID: "d"}}), kv.ErrInvalid)
	if ok, _ := r.Exist(c, "d"); ok {
		t.Fatal("a refused batch wrote")
	}
}

type doc struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func testTyped(t *testing.T, r *kv.Repository) {
	c := ctx(t)
	docs := kv.Typed[doc]{R: r, Codec: kv.JSON[doc]{}}
	must(t, docs.Add(c, "d", doc{"x", 1}))
	v, ok, err := docs.Get(c, "d")
	if err != nil || !ok || v.Value != (doc{"x", 1}) || v.Version != 1 {
		t.Fatalf("typed Get: %+v %v %v", v, ok, err)
	}
	if _, err := docs.Update(c, "d", 1, doc{"x", 2}); err != nil {
		t.Fatal(err)
	}
	must(t, docs.Delete(c, "d", 2))
}

// testContended: clients increment a counter in one key by get and
// compare-and-set, each making its share of attempts. No update may be
// lost: the counter ends at the number of successful updates, and the
// version one above it.
func testContended(t *testing.T, r *kv.Repository, clients, each int) {
	c := ctx(t)
	must(t, r.Add(c, "counter", []byte("0")))
	var stale, succeeded atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				e, ok, err := r.Get(c, "counter")
				if err != nil || !ok {
					errs <- fmt.Errorf("get: %v %v", ok, err)
					return
				}
				n, _ := strconv.Atoi(string(e.Value))
				v, err := r.Update(c, "counter", e.Version, []byte(strconv.Itoa(n+1)))
				var se *kv.StaleError
				switch {
				case errors.As(err, &se):
					if se.Current <= e.Version {
						errs <- fmt.Errorf("stale at %d reports current %d", e.Version, se.Current)
						return
					}
					stale.Add(1)
				case err != nil:
					errs <- err
					return
				case v != e.Version+1:
					errs <- fmt.Errorf("update from %d returned %d", e.Version, v)
					return
				default:
					succeeded.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e, _, err := r.Get(c, "counter")
	must(t, err)
	total := succeeded.Load()
	if total == 0 || string(e.Value) != strconv.FormatInt(total, 10) || e.Version != uint64(total)+1 {
		t.Fatalf("after %d successful updates: value %s, version %d", total, e.Value, e.Version)
	}
	t.Logf("%d clients × %d attempts: %d updates, %d stale", clients, each, total, stale.Load())
}

// The linearizability check: clients mix add, get, update and delete on a
// few keys, the history is recorded with real call and return times, and
// porcupine searches for a sequential order that explains every answer.
// Model, Input and Output are exported for the cluster's fault tests, which
// record the same operations over HTTP.

// Input is one operation on a key: Op is "add", "get", "update" or
// "delete"; Version is the version an update or delete expects; Value what
// an add or update writes.
type Input struct {
	Op      string
	Key     string
	Version uint64
	Value   string
}

// Output is an operation's answer. Kind is "ok", "absent" (get of a missing
// key), "exists" (add of a present key), "notfound" (update or delete of a
// missing key), "stale" (Version is then the current version) or "unknown":
// the operation timed out or its connection broke, so it may or may not
// have taken effect (record it with a Return after every other operation's).
// Version is the version a get read or an update wrote; Value what a get
// read.
type Output struct {
	Kind    string
	Version uint64
	Value   string
}

// Outcome kinds of Output.
const (
	OK       = "ok"
	Absent   = "absent"
	Exists   = "exists"
	NotFound = "notfound"
	Stale    = "stale"
	Unknown  = "unknown"
)

type linState struct {
	exists  bool
	version uint64
	value   string
}

// Model is the porcupine model of a versioned key/value register, one
// partition per key. An operation of unknown outcome is allowed either
// way: it takes effect at its linearization point if its precondition then
// holds, and porcupine may also place it after every other operation, where
// its effect is seen by no one.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(Input), output.(Output)
		unknown := out.Kind == Unknown
		switch in.Op {
		case "get":
			if unknown {
				return true, s
			}
			if !s.exists {
				return out.Kind == Absent, s
			}
			return out.Kind == OK && out.Version == s.version && out.Value == s.value, s
		case "add":
			if s.exists {
				return unknown || out.Kind == Exists, s
			}
			return unknown || out.Kind == OK, linState{true, 1, in.Value}
		case "update", "delete":
			switch {
			case !s.exists:
				return unknown || out.Kind == NotFound, s
			case s.version != in.Version:
				return unknown || out.Kind == Stale && out.Version == s.version, s
			case in.Op == "update":
				return unknown || out.Kind == OK && out.Version == s.version+1, linState{true, s.version + 1, in.Value}
			default:
				return unknown || out.Kind == OK, linState{}
			}
		}
		return false, s
	},
	Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		switch in.Op {
		case "get":
			return fmt.Sprintf("get(%s) -> %s v%d %q", in.Key, out.Kind, out.Version, out.Value)
		case "add":
			return fmt.Sprintf("add(%s, %q) -> %s", in.Key, in.Value, out.Kind)
		}
		return fmt.Sprintf("%s(%s, v%d, %q) -> %s v%d", in.Op, in.Key, in.Version, in.Value, out.Kind, out.Version)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if !s.exists {
			return "absent"
		}
		return fmt.Sprintf("v%d %q", s.version, s.value)
	},
}

func testLinearizable(t *testing.T, r *kv.Repository, clients, ops int) {
	c := ctx(t)
	keys := []string{"l0", "l1", "l2", "l3"}
	var mu sync.Mutex
	var history []porcupine.Operation
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for id := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := map[string]uint64{}
			for i := range ops {
				k := keys[(id*7+i*13)%len(keys)]
				in := Input{Key: k, Value: fmt.Sprintf("c%d-%d", id, i)}
				switch x := (id + i*5) % 10; {
				case x < 3:
					in.Op = "get"
				case x < 7:
					in.Op, in.Version = "update", seen[k]
				case x < 8:
					in.Op, in.Version = "delete", seen[k]
				default:
					in.Op = "add"
				}
				if in.Version == 0 {
					in.Version = 1
				}
				call := time.Since(start).Nanoseconds()
				var out Output
				var err error
				switch in.Op {
				case "get":
					var e kv.Entry
					var ok bool
					e, ok, err = r.Get(c, k)
					out = Output{Kind: "absent"}
					if ok {
						out = Output{Kind: "ok", Version: e.Version, Value: string(e.Value)}
						seen[k] = e.Version
					}
				case "add":
					err = r.Add(c, k, []byte(in.Value))
					out.Kind = "ok"
				case "update":
					out.Version, err = r.Update(c, k, in.Version, []byte(in.Value))
					out.Kind = "ok"
					seen[k] = out.Version
				case "delete":
					err = r.Delete(c, k, in.Version)
					out.Kind = "ok"
				}
				var se *kv.StaleError
				switch {
				case err == nil:
				case errors.As(err, &se):
					out = Output{Kind: "stale", Version: se.Current}
					seen[k] = se.Current
				case errors.Is(err, kv.ErrExists):
					out = Output{Kind: "exists"}
				case errors.Is(err, kv.ErrNotFound):
					out = Output{Kind: "notfound"}
				default:
					errs <- err
					return
				}
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res := porcupine.CheckOperationsTimeout(Model, history, 60*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations is not linearizable (%v)", len(history), res)
	}
	kinds := map[string]int{}
	for _, op := range history {
		kinds[op.Input.(Input).Op+"/"+op.Output.(Output).Kind]++
	}
	t.Logf("%d operations linearizable: %v", len(history), kinds)
}

// Full returns o at the specified full size (64 clients × 10,000 contended
// updates) when LOGBOOK_KV_FULL=1, else o.
func Full(o Options) Options {
	if os.Getenv("LOGBOOK_KV_FULL") == "1" {
		o.Contenders, o.ContendedUpdates = 64, 10000
	}
	return o
}
