package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/logbook/logbook/engine/eventstore"
)

// LinearizabilityOptions shapes the workload of CheckLinearizable: Clients
// goroutines each run Ops operations on Streams streams — appends of one
// to three events with an expected version (the version the client last
// saw, no stream, or any), reads of a stream's version and reads of the
// whole stream — one history per round.
type LinearizabilityOptions struct {
	Clients int    // default 16
	Streams int    // default 3
	Ops     int    // per client and round, default 40
	Rounds  int    // histories, default 1
	Seed    uint64 // of the clients' choices
	Prefix  string // of the stream ids; default "lin"
	// VisualizeDir receives porcupine's visualization of a history that
	// is not linearizable; default os.TempDir(), "-" for none.
	VisualizeDir string
}

func (c LinearizabilityOptions) withDefaults() LinearizabilityOptions {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&c.Clients, 16)
	set(&c.Streams, 3)
	set(&c.Ops, 40)
	set(&c.Rounds, 1)
	if c.Prefix == "" {
		c.Prefix = "lin"
	}
	return c
}

// LinearizabilityReport says what CheckLinearizable checked.
type LinearizabilityReport struct {
	Histories  int
	Operations int
	Appends    int // that succeeded
	Conflicts  int
}

// Linearizability runs CheckLinearizable on s and fails t if a history is
// not linearizable.
func Linearizability(t *testing.T, s eventstore.Store, cfg LinearizabilityOptions) LinearizabilityReport {
	t.Helper()
	rep, err := CheckLinearizable(t.Context(), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d histories, %d operations (%d appends, %d conflicts): linearizable", rep.Histories, rep.Operations, rep.Appends, rep.Conflicts)
	return rep
}

// Operations of the history, and what they returned.
type linKind int

const (
	linAppend linKind = iota
	linVersion
	linRead
)

type linIn struct {
	kind   linKind
	stream string
	expect eventstore.ExpectedVersion
	n      int // events appended
	tag    int // the append's id, the data of its events
}

type linOut struct {
	conflict bool
	version  uint64 // after an append; the conflict's actual; a version read
	events   string // a read: the tags of the stream's events, "3,3,7,"
	first    uint64 // positions of an append
	last     uint64
}

// linState is one stream: its version and its events' tags.
type linState struct {
	version uint64
	events  string
}

// streamModel is the sequential specification of a stream: a versioned
// log that an append with a satisfied expected version extends, that
// refuses one with an unsatisfied one reporting the actual version, and
// that reads return whole.
var streamModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			s := op.Input.(linIn).stream
			if _, ok := by[s]; !ok {
				order = append(order, s)
			}
			by[s] = append(by[s], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, s := range order {
			out = append(out, by[s])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(linState), input.(linIn), output.(linOut)
		switch in.kind {
		case linVersion:
			return out.version == st.version, st
		case linRead:
			return out.events == st.events, st
		}
		ok := in.expect == eventstore.Any || (in.expect == eventstore.NoStream && st.version == 0) ||
			(in.expect >= 0 && uint64(in.expect) == st.version)
		if out.conflict {
			return !ok && out.version == st.version, st
		}
		if !ok || out.version != st.version+uint64(in.n) {
			return false, st
		}
		return true, linState{st.version + uint64(in.n), st.events + strings.Repeat(strconv.Itoa(in.tag)+",", in.n)}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linIn), output.(linOut)
		switch in.kind {
		case linVersion:
			return fmt.Sprintf("version(%s) = %d", in.stream, out.version)
		case linRead:
			return fmt.Sprintf("read(%s) = [%s]", in.stream, out.events)
		}
		if out.conflict {
			return fmt.Sprintf("append(%s, %v, %d×#%d): conflict, actual %d", in.stream, in.expect, in.n, in.tag, out.version)
		}
		return fmt.Sprintf("append(%s, %v, %d×#%d) = %d", in.stream, in.expect, in.n, in.tag, out.version)
	},
	DescribeState: func(state any) string {
		st := state.(linState)
		return fmt.Sprintf("v%d [%s]", st.version, st.events)
	},
}

// CheckLinearizable records concurrent histories of appends and reads on
// s, through the Store interface, and checks each with porcupine against
// streamModel. It also checks what a per-stream model cannot see: the
// positions of a round's appends are exactly the next ones of the log,
// each once, and an append that returned before another was called has
// the lower positions. It returns an error for a history that is not
// linearizable (writing porcupine's visualization of it to a temporary
// file named in the error, see VisualizeDir), for one the checker could not decide within
// a minute, and for any failure of the store.
func CheckLinearizable(ctx context.Context, s eventstore.Store, cfg LinearizabilityOptions) (LinearizabilityReport, error) {
	cfg = cfg.withDefaults()
	var rep LinearizabilityReport
	for round := range cfg.Rounds {
		ops, err := recordHistory(ctx, s, cfg, round)
		if err != nil {
			return rep, err
		}
		rep.Histories++
		rep.Operations += len(ops)
		for _, op := range ops {
			if op.Input.(linIn).kind == linAppend {
				if op.Output.(linOut).conflict {
					rep.Conflicts++
				} else {
					rep.Appends++
				}
			}
		}
		res, info := porcupine.CheckOperationsVerbose(streamModel, ops, time.Minute)
		switch res {
		case porcupine.Illegal:
			path := "(no visualization)"
			if cfg.VisualizeDir != "-" {
				dir := cfg.VisualizeDir
				if dir == "" {
					dir = os.TempDir()
				}
				path = filepath.Join(dir, fmt.Sprintf("logbook-linearizability-%d.html", time.Now().UnixNano()))
				if err := porcupine.VisualizePath(streamModel, info, path); err != nil {
					path = "(no visualization: " + err.Error() + ")"
				}
			}
			return rep, fmt.Errorf("round %d: history of %d operations is not linearizable; see %s", round, len(ops), path)
		case porcupine.Unknown:
			return rep, fmt.Errorf("round %d: the checker could not decide a history of %d operations within a minute", round, len(ops))
		}
	}
	return rep, nil
}

func recordHistory(ctx context.Context, s eventstore.Store, cfg LinearizabilityOptions, round int) ([]porcupine.Operation, error) {
	head, err := s.Head(ctx)
	if err != nil {
		return nil, err
	}
	streams := make([]string, cfg.Streams)
	for i := range streams {
		streams[i] = fmt.Sprintf("%s-%d-%d", cfg.Prefix, round, i)
	}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu     sync.Mutex
		ops    []porcupine.Operation
		failed error
		wg     sync.WaitGroup
	)
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(round*1000+c)))
			seen := make([]uint64, len(streams)) // the last version this client saw
			for i := range cfg.Ops {
				k := rng.IntN(len(streams))
				in := linIn{stream: streams[k], tag: c*cfg.Ops + i + 1}
				switch r := rng.IntN(10); {
				case r < 2:
					in.kind = linVersion
				case r < 3:
					in.kind = linRead
				default:
					in.kind, in.n = linAppend, 1+rng.IntN(3)
					switch r {
					case 3:
						in.expect = eventstore.NoStream
					case 4:
						in.expect = eventstore.Any
					default:
						in.expect = eventstore.Exactly(seen[k])
					}
				}
				call := now()
				out, err := runLinOp(ctx, s, in)
				ret := now()
				if err != nil {
					mu.Lock()
					failed = errors.Join(failed, fmt.Errorf("client %d: %s: %w", c, streamModel.DescribeOperation(in, linOut{}), err))
					mu.Unlock()
					return
				}
				if in.kind != linRead {
					seen[k] = out.version
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	return ops, checkPositions(ops, head)
}

func runLinOp(ctx context.Context, s eventstore.Store, in linIn) (linOut, error) {
	var out linOut
	switch in.kind {
	case linVersion:
		v, err := s.StreamVersion(ctx, in.stream)
		out.version = v
		return out, err
	case linRead:
		evs, err := s.ReadStream(ctx, in.stream, 1, 1000)
		if err != nil {
			return out, err
		}
		if len(evs) == 1000 {
			return out, errors.New("a stream of 1000 events, more than one read returns: lower Ops or raise Streams")
		}
		var b strings.Builder
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) || (i > 0 && ev.Position <= evs[i-1].Position) {
				return out, fmt.Errorf("event %d of the read has seq %d, position %d", i, ev.Seq, ev.Position)
			}
			b.Write(ev.Data)
			b.WriteByte(',')
		}
		out.events = b.String()
		return out, nil
	}
	evs := make([]eventstore.NewEvent, in.n)
	for i := range evs {
		evs[i] = eventstore.NewEvent{Type: "lin", Data: []byte(strconv.Itoa(in.tag))}
	}
	res, err := s.Append(ctx, in.stream, in.expect, evs)
	var ce *eventstore.ConflictError
	if errors.As(err, &ce) {
		out.conflict, out.version = true, ce.Actual
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if res.Duplicate || res.LastSeq-res.FirstSeq+1 != uint64(in.n) || res.LastPosition-res.FirstPosition+1 != uint64(in.n) {
		return out, fmt.Errorf("append of %d events answered %+v", in.n, res)
	}
	out.version, out.first, out.last = res.LastSeq, res.FirstPosition, res.LastPosition
	return out, nil
}

// checkPositions checks the appends' positions across streams: together
// they are exactly head+1, head+2, …, and real-time order is log order.
func checkPositions(ops []porcupine.Operation, head uint64) error {
	var apps []porcupine.Operation
	total := uint64(0)
	for _, op := range ops {
		if op.Input.(linIn).kind == linAppend && !op.Output.(linOut).conflict {
			apps = append(apps, op)
			total += uint64(op.Input.(linIn).n)
		}
	}
	taken := make([]bool, total)
	for _, op := range apps {
		out := op.Output.(linOut)
		for p := out.first; p <= out.last; p++ {
			if p <= head || p > head+total || taken[p-head-1] {
				return fmt.Errorf("append %s: position %d taken twice or outside %d–%d", streamModel.DescribeOperation(op.Input, out), p, head+1, head+total)
			}
			taken[p-head-1] = true
		}
	}
	// An append's positions must follow those of every append that
	// returned before it was called: sort by return and keep the
	// highest position returned so far.
	byReturn := slices.SortedFunc(slices.Values(apps), func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	byCall := slices.SortedFunc(slices.Values(apps), func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var maxDone uint64
	j := 0
	for _, op := range byCall {
		for j < len(byReturn) && byReturn[j].Return < op.Call {
			maxDone = max(maxDone, byReturn[j].Output.(linOut).last)
			j++
		}
		if out := op.Output.(linOut); out.first <= maxDone {
			return fmt.Errorf("append %s has position %d, below %d of an append that returned before it was called", streamModel.DescribeOperation(op.Input, out), out.first, maxDone)
		}
	}
	return nil
}
