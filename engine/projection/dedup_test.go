package projection_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// docView is a view on storage without transactions across records: a
// Pebble database used as a document store, one document per stream
// (count, sum, and the seq of the stream's last event applied), each
// written on its own; and the checkpoint in a file beside it, written
// every few batches, after the documents. A crash can leave any prefix of
// a batch's documents written and the checkpoint far behind: only the
// Dedup filter, whose entries are the documents' seqs, keeps it exact.
type docView struct {
	dir     string
	db      *pebble.DB
	dedup   projection.Dedup
	cp      uint64
	cpEvery int
	batches int
	dropped int

	// crashAt, if set, makes Apply fail as if the process died after
	// writing doc of the docs documents of batch number batch.
	crashAt func(batch, doc, docs int) bool
	// pause is called between writes; the crash test sleeps there so
	// that kills land between them.
	pause func()
	// write is how documents are written: the crash test makes each one
	// durable, as a document store acknowledges a write, else a kill
	// would take back every document after the last checkpoint.
	write *pebble.WriteOptions
}

var errSimulatedCrash = errors.New("simulated crash")

func openDocView(dir string, cpEvery int) (*docView, error) {
	db, err := pebble.Open(filepath.Join(dir, "docs"), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return nil, err
	}
	v := &docView{dir: dir, db: db, cpEvery: cpEvery, pause: func() {}, write: pebble.NoSync}
	docs, err := v.docs()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	for stream, d := range docs {
		v.dedup.Set(stream, d.seq) // the filter is loaded with the state
	}
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		_ = db.Close()
		return nil, err
	default:
		if v.cp, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("checkpoint file: %w", err)
		}
	}
	return v, nil
}

type doc struct {
	agg
	seq uint64
}

func (v *docView) docs() (map[string]doc, error) {
	iter, err := v.db.NewIter(&pebble.IterOptions{LowerBound: []byte("d/"), UpperBound: []byte("d0")})
	if err != nil {
		return nil, err
	}
	out := make(map[string]doc)
	for ok := iter.First(); ok; ok = iter.Next() {
		a, seq, err := decodeAggSeq(iter.Value())
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		out[string(iter.Key()[2:])] = doc{a, seq}
	}
	return out, iter.Close()
}

func (v *docView) Checkpoint(context.Context) (uint64, error) { return v.cp, nil }

func (v *docView) Apply(_ context.Context, batch []eventstore.Event) error {
	fresh := v.dedup.Fresh(batch)
	v.dropped += len(batch) - len(fresh)
	var order []string
	byStream := make(map[string][]eventstore.Event)
	for _, ev := range fresh {
		if _, ok := byStream[ev.Stream]; !ok {
			order = append(order, ev.Stream)
		}
		byStream[ev.Stream] = append(byStream[ev.Stream], ev)
	}
	v.batches++
	for i := 0; i <= len(order); i++ {
		if v.crashAt != nil && v.crashAt(v.batches, i, len(order)) {
			return errSimulatedCrash
		}
		if i == len(order) {
			break
		}
		if err := v.writeDoc(order[i], byStream[order[i]]); err != nil {
			return err
		}
		v.pause()
	}
	if v.batches%v.cpEvery != 0 {
		return nil
	}
	// The checkpoint lives elsewhere, so nothing but this orders the two
	// writes: the documents must be durable before it may name them.
	if err := v.db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	v.pause()
	last := batch[len(batch)-1].Position
	tmp := filepath.Join(v.dir, "checkpoint.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatUint(last, 10))
	if err == nil {
		err = f.Sync()
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "checkpoint")); err != nil {
		return err
	}
	v.cp = last
	return nil
}

// writeDoc updates a stream's document with its events, in one write.
func (v *docView) writeDoc(stream string, events []eventstore.Event) error {
	key := []byte("d/" + stream)
	var a agg
	b, closer, err := v.db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		a, err = decodeAgg(b)
		_ = closer.Close()
		if err != nil {
			return fmt.Errorf("document of %s: %w", stream, err)
		}
	}
	t := tally{stream: a}
	for _, ev := range events {
		if err := t.add(ev); err != nil {
			return err
		}
	}
	return v.db.Set(key, encodeAgg(t[stream], events[len(events)-1].Seq), v.write)
}

func (v *docView) Close() error { return v.db.Close() }

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)         {}
func (quietPebble) Errorf(f string, args ...any) { fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", args...) }
func (quietPebble) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// checkDocs checks a docView's documents against the log: each stream's
// document is the exactly-once effect of the stream's first seq events,
// and no document is behind the checkpoint cp. Complete also requires the
// whole log.
func checkDocs(st eventstore.Store, docs map[string]doc, cp uint64, complete bool) error {
	ctx := context.Background()
	type streamLog struct {
		vals   []int64
		seqAtC uint64 // the stream's last seq at or below cp
	}
	logs := make(map[string]*streamLog)
	for from := uint64(1); ; {
		page, err := st.ReadAll(ctx, from, 0)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			l := logs[ev.Stream]
			if l == nil {
				l = &streamLog{}
				logs[ev.Stream] = l
			}
			v, err := strconv.ParseInt(string(ev.Data), 10, 64)
			if err != nil {
				return err
			}
			l.vals = append(l.vals, v)
			if ev.Position <= cp {
				l.seqAtC = ev.Seq
			}
		}
		from = page[len(page)-1].Position + 1
	}
	for stream, d := range docs {
		l := logs[stream]
		if l == nil || d.seq > uint64(len(l.vals)) {
			return fmt.Errorf("document of %s at seq %d, beyond the log", stream, d.seq)
		}
		var sum int64
		for _, v := range l.vals[:d.seq] {
			sum += v
		}
		if d.Count != int(d.seq) || d.Sum != sum {
			return fmt.Errorf("document of %s at seq %d holds count %d sum %d, want count %d sum %d: not exactly once",
				stream, d.seq, d.Count, d.Sum, d.seq, sum)
		}
	}
	for stream, l := range logs {
		want := l.seqAtC
		if complete {
			want = uint64(len(l.vals))
		}
		if d := docs[stream]; d.seq < want {
			return fmt.Errorf("document of %s at seq %d, behind seq %d (checkpoint %d, complete %v)", stream, d.seq, want, cp, complete)
		}
	}
	return nil
}

func TestDedupFresh(t *testing.T) {
	var d projection.Dedup
	ev := func(stream string, seq uint64) eventstore.Event { return eventstore.Event{Stream: stream, Seq: seq} }
	first := []eventstore.Event{ev("a", 1), ev("b", 1), ev("a", 2)}
	if got := d.Fresh(first); len(got) != 3 || &got[0] != &first[0] {
		t.Fatalf("first batch: %v (a copy: %v)", got, len(got) == 3 && &got[0] != &first[0])
	}
	replay := []eventstore.Event{ev("a", 2), ev("b", 1), ev("a", 3), ev("b", 2), ev("c", 1)}
	got := d.Fresh(replay)
	key := func(e eventstore.Event) string { return fmt.Sprintf("%s/%d", e.Stream, e.Seq) }
	if len(got) != 3 || key(got[0]) != "a/3" || key(got[1]) != "b/2" || key(got[2]) != "c/1" {
		t.Fatalf("replayed batch: %v", got)
	}
	if d.Last("a") != 3 || d.Last("b") != 2 || d.Last("zz") != 0 || d.Len() != 3 {
		t.Fatalf("filter after two batches: a %d b %d len %d", d.Last("a"), d.Last("b"), d.Len())
	}

	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back projection.Dedup
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if back.Len() != 3 || back.Last("a") != 3 || back.Last("b") != 2 || back.Last("c") != 1 {
		t.Fatalf("round trip lost entries")
	}
	if again, _ := back.MarshalBinary(); string(again) != string(b) {
		t.Fatal("encoding is not deterministic")
	}
	for i := range b {
		var x projection.Dedup
		if err := x.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("truncated encoding of %d bytes accepted", i)
		}
	}
}

// TestDedupViewReplaysExactly crashes the document view at many points of
// a batch (in process, by failing Apply as a kill would stop it), reopens
// it from its storage and lets a new runner resume from its stale
// checkpoint: the filter must drop every replayed event.
func TestDedupViewReplaysExactly(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	fill(t, st, 11, 1500, nil)
	dir := t.TempDir()
	dropped := 0
	for round, crash := range [][2]int{{2, 3}, {5, 0}, {4, 7}, {9, 1}, {3, 10}} {
		v, err := openDocView(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		v.crashAt = func(batch, doc, docs int) bool { return batch == crash[0] && doc == min(crash[1], docs) }
		r := projection.NewRunner(st, v, projection.Options{MaxBatch: 40})
		if err := r.Run(ctx); !errors.Is(err, errSimulatedCrash) {
			t.Fatalf("round %d: run: %v", round, err)
		}
		dropped += v.dropped
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		v, err = openDocView(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := v.docs()
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDocs(st, docs, v.cp, false); err != nil {
			t.Fatalf("round %d, after the crash: %v", round, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		fill(t, st, 11, 100, nil)
	}
	v, err := openDocView(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := projection.NewRunner(st, v, projection.Options{MaxBatch: 40})
	stop := running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dropped += v.dropped
	docs, err := v.docs()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDocs(st, docs, v.cp, true); err != nil {
		t.Fatalf("after catching up: %v", err)
	}
	got := tally{}
	for s, d := range docs {
		got[s] = d.agg
	}
	if want := expected(t, st, all, ""); !maps.Equal(got, want) {
		t.Fatalf("documents %v, log %v", got, want)
	}
	if dropped == 0 {
		t.Fatal("no replayed event was dropped: the test did not exercise the filter")
	}
	t.Logf("%d replayed events dropped", dropped)
}
