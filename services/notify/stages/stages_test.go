//go:build unix

package stages_test

// The stage deployment's tests: each stage runs as two real processes
// (this test binary re-executed, internal/crashtest), connected by a real
// Kafka's topics, with the registry served over HTTP and a loopback sink.
// One stage's process is SIGKILLed mid-run and restarted under the same
// instance name; the topics must then hold every unit once and the sink
// every message. The same run without transactions must fail the check.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/internal/crashtest"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/stages"
	"github.com/logbook/logbook/services/notify/userscdc"
)

const (
	envStage    = "LOGBOOK_STAGES_STAGE"
	envInstance = "LOGBOOK_STAGES_INSTANCE"
	envPrefix   = "LOGBOOK_STAGES_PREFIX"
	envRegistry = "LOGBOOK_STAGES_REGISTRY"
	envUsers    = "LOGBOOK_STAGES_USERS"
	envSchema   = "LOGBOOK_STAGES_SCHEMA"
	envSink     = "LOGBOOK_STAGES_SINK"
	envUnsafe   = "LOGBOOK_STAGES_AT_LEAST_ONCE"

	adminToken = "stages-test-admin"
	notifyType = "like_update"
	users      = 2000
	chunk      = 40
	// lookupDelay slows each users' lookup in the children, so that a
	// stage's work spans many polls and a kill lands inside one.
	lookupDelay = 15 * time.Millisecond
)

// slowUsers delays each lookup.
type slowUsers struct{ u notify.Users }

func (s slowUsers) Users(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	time.Sleep(lookupDelay)
	return s.u.Users(ctx, ids)
}

// TestStageChild is not a test: it is one stage process the tests start
// and kill. Run directly, it skips.
func TestStageChild(t *testing.T) {
	out := crashtest.Child(t)
	ctx := context.Background()
	stage := os.Getenv(envStage)
	schemas, err := registry.NewClient(os.Getenv(envRegistry), adminToken)
	if err != nil {
		out.Fail("registry: %v", err)
	}
	cfg := stages.Config{
		Bus: kafkabus.Config{Brokers: testenv.Kafka(t)}, Topics: stages.TopicsOf(os.Getenv(envPrefix)), Schemas: schemas,
		Instance: os.Getenv(envInstance), Policy: pipeline.DefaultPolicy, Templates: pipeline.DefaultTemplates,
		MaxBatch: 4, TxnTimeout: 10 * time.Second, AtLeastOnce: os.Getenv(envUnsafe) == "1",
	}
	if stage == stages.Deliver {
		u := os.Getenv(envSink)
		cfg.Deliverer, err = deliver.New(deliver.Config{Endpoints: map[notify.Channel]string{notify.Push: u, notify.Email: u}})
	} else {
		var src *userscdc.Source
		src, err = userscdc.OpenSource(ctx, os.Getenv(envUsers), os.Getenv(envSchema))
		cfg.Users = slowUsers{userscdc.LookupUsers{Source: src}}
	}
	if err != nil {
		out.Fail("%s: %v", stage, err)
	}
	tr, err := stages.New(ctx, stage, cfg)
	if err != nil {
		out.Fail("%s: %v", stage, err)
	}
	go func() {
		if err := tr.Run(ctx); err != nil {
			out.Fail("%s: %v", stage, err)
		}
	}()
	out.Printf("READY")
	var last, pending uint64
	var aborted int64
	for {
		st := tr.Stats()
		if n := st.Committed; n != last {
			last = n
			out.Printf("COMMITTED %d", n)
		}
		if st.Aborted != aborted {
			aborted = st.Aborted
			out.Printf("ABORTED %d", aborted)
		}
		// Output of a poll not yet committed is on the brokers: a kill
		// now leaves it there (without transactions) or aborts it.
		if st.Acked > st.Out && st.Acked != pending {
			pending = st.Acked
			out.Printf("PENDING %d", pending)
		}
		time.Sleep(time.Millisecond)
	}
}

// rig is one run's pipeline: topics, registry, users, sink, processes.
type rig struct {
	t        *testing.T
	bus      kafkabus.Config
	topics   stages.Topics
	regURL   string
	usersURL string
	schema   string
	reg      *registry.Registry
	sink     *sink.Sink
	sinkURL  string
	expected int64
	unsafe   bool

	mu        sync.Mutex
	committed map[string]int // by instance, the child's last COMMITTED
	pending   map[string]int // by instance, its PENDING lines
	procs     map[string]*crashtest.Process
}

func randomName(kind string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

func newRig(t *testing.T, unsafe bool) *rig {
	ctx := context.Background()
	r := &rig{t: t, bus: kafkabus.Config{Brokers: testenv.Kafka(t)}, topics: stages.TopicsOf(randomName("stages")), unsafe: unsafe,
		committed: map[string]int{}, pending: map[string]int{}, procs: map[string]*crashtest.Process{}}
	if err := stages.EnsureTopics(ctx, r.bus, r.topics, 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := kafkabus.NewClient(r.bus)
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, r.topics.All()...)
	})

	// logbook's registry, on its own store, served as logbook serves it.
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg, err := registry.Open(ctx, st, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	r.reg = reg
	tokens, err := auth.ParseEnv(adminToken+":schema-admin", registry.Roles())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	regSrv := httptest.NewServer(mux)
	t.Cleanup(regSrv.Close)
	r.regURL = regSrv.URL + "/registry"

	// The users, and what a request to all of them should deliver.
	r.usersURL, r.schema = testenv.URL(t), testenv.Schema(t)
	src, err := userscdc.OpenSource(ctx, r.usersURL, r.schema)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Generate(ctx, userscdc.Population{Users: users, Type: notifyType, Refuse: 0.1, OptOut: 0.02, NoEmail: 0.1, NoPush: 0.2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	all, err := src.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= users; id++ {
		r.expected += int64(len(pipeline.DefaultPolicy.Check(all[id], notifyType).Channels))
	}

	r.sink, err = sink.New(sink.Options{Latency: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sinkSrv := httptest.NewServer(r.sink)
	t.Cleanup(sinkSrv.Close)
	r.sinkURL = sinkSrv.URL + sink.Path
	return r
}

// start runs one stage process and waits until it runs.
func (r *rig) start(stage, instance string) {
	r.t.Helper()
	unsafe := "0"
	if r.unsafe {
		unsafe = "1"
	}
	p := crashtest.Start(r.t, crashtest.Spec{
		Test: "TestStageChild",
		Env: []string{envStage + "=" + stage, envInstance + "=" + instance, envPrefix + "=" + r.topics.Prefix, envRegistry + "=" + r.regURL,
			envUsers + "=" + r.usersURL, envSchema + "=" + r.schema, envSink + "=" + r.sinkURL, envUnsafe + "=" + unsafe},
		Line: func(line string) {
			if strings.HasPrefix(line, "ABORTED") {
				r.t.Logf("%s: %s", instance, line)
			}
			if n, ok := strings.CutPrefix(line, "COMMITTED "); ok {
				k, _ := strconv.Atoi(n)
				r.mu.Lock()
				r.committed[instance] = k
				r.mu.Unlock()
			}
			if strings.HasPrefix(line, "PENDING ") {
				r.mu.Lock()
				r.pending[instance]++
				r.mu.Unlock()
			}
		},
	})
	if !p.WaitFor("READY", 60*time.Second) {
		r.t.Fatalf("stage %s (%s) did not start", stage, instance)
	}
	r.mu.Lock()
	r.procs[instance] = p
	r.committed[instance] = 0
	r.mu.Unlock()
}

// pendingOf counts the times instance reported output not yet committed.
func (r *rig) pendingOf(instance string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[instance]
}

func (r *rig) commits(instance string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.committed[instance]
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitEvery(t, timeout, 20*time.Millisecond, what, cond)
}

// waitEvery is waitFor looking every interval.
func waitEvery(t *testing.T, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// run starts two processes per stage, sends one request to every user,
// SIGKILLs a process of stage kill kills times (none if kill is ""),
// each once it has committed a poll, restarting it under the same
// instance name, and returns the audit once the pipeline has drained.
func (r *rig) run(kill string, kills int) stages.Audit {
	t := r.t
	ctx := context.Background()
	for _, s := range stages.Names {
		r.start(s, s+"-0")
		r.start(s, s+"-1")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := stages.WaitStable(sctx, r.bus, r.topics, 2); err != nil {
		t.Fatal(err)
	}
	schemas, err := registry.NewClient(r.regURL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := stages.NewSender(ctx, r.bus, schemas, r.topics, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	ids := make([]int64, users)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	req := &notify.Request{ID: randomName("req"), Type: notifyType, ClubID: 1, Sender: "test", Timestamp: time.Now(), ToUsers: ids}
	if _, err := snd.Send(ctx, req, chunk); err != nil {
		t.Fatal(err)
	}
	victim := kill + "-0"
	if kill == "" {
		kills = 0
	}
	for i := range kills {
		before := r.commits(victim)
		waitFor(t, 60*time.Second, victim+" to commit a poll", func() bool { return r.commits(victim) > before })
		// Into a later poll, with some of its output on the brokers and
		// its commit still to come (the lookups that follow take
		// lookupDelay each): not a moment picked by a timer, which a
		// loaded machine could place between two polls.
		// The window is a lookup or more (lookupDelay): look often.
		pending := r.pendingOf(victim)
		waitEvery(t, 60*time.Second, time.Millisecond, victim+" to write output it has not committed", func() bool { return r.pendingOf(victim) > pending })
		r.mu.Lock()
		p := r.procs[victim]
		r.mu.Unlock()
		p.Kill()
		t.Logf("kill %d: %s SIGKILLed after %d committed polls", i+1, victim, r.commits(victim))
		r.start(kill, victim)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if st, err := r.sink.WaitUnique(wctx, r.expected); err != nil {
		t.Fatalf("the sink took %d of %d messages: %v", st.UniqueKeys, r.expected, err)
	}
	var a stages.Audit
	codecs := stages.NewCodecs()
	waitFor(t, 60*time.Second, "every batch's outcome", func() bool {
		a, err = stages.AuditTopics(ctx, r.bus, r.topics, codecs, "")
		if err != nil {
			t.Fatal(err)
		}
		return a.Complete()
	})
	// Whatever a killed process left in flight has been aborted or
	// written by now; read once more after the transaction timeout.
	time.Sleep(2 * time.Second)
	if a, err = stages.AuditTopics(ctx, r.bus, r.topics, codecs, ""); err != nil {
		t.Fatal(err)
	}
	st := r.sink.Stats()
	t.Logf("audit %+v; sink: %d unique keys of %d expected, %d messages posted again (dropped by key)", a, st.UniqueKeys, r.expected, st.Duplicates)
	return a
}

// The stage deployment delivers every message once and its topics hold
// every unit once, with no kill and with a SIGKILL of each stage.
func TestStagesExactlyOnce(t *testing.T) {
	for _, kill := range []string{"", stages.Preference, stages.Build, stages.Deliver} {
		name := "no kill"
		if kill != "" {
			name = "kill " + kill
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, false)
			a := r.run(kill, 1)
			if !a.Exact() {
				t.Errorf("not exact: %s", strings.Join(a.Problems(), "; "))
			}
			st := r.sink.Stats()
			if st.UniqueKeys != r.expected || a.Delivered != r.expected || a.Planned != r.expected {
				t.Errorf("sink took %d distinct messages, outcomes count %d delivered, the check planned %d; want %d",
					st.UniqueKeys, a.Delivered, a.Planned, r.expected)
			}
			// Only a delivery poll whose transaction was aborted (its
			// process killed, or its group rebalanced) is posted again,
			// by the partition's next owner: the idempotency key makes
			// the sink take each message once, and the outcomes topic
			// (checked above) counts each batch once. Killing another
			// stage does not touch the delivery group.
			if kill != stages.Deliver && st.Duplicates != 0 {
				t.Errorf("the sink was posted %d messages again without a delivery process killed", st.Duplicates)
			}
			if a.Chunks != (users+chunk-1)/chunk || a.Checked != a.Chunks {
				t.Errorf("%d chunks sent, %d checked; want %d", a.Chunks, a.Checked, (users+chunk-1)/chunk)
			}
			if kill == "" {
				r.checkWireFormat()
				// Several processes per stage: each did part of the work.
				for _, s := range stages.Names {
					for _, i := range []string{"-0", "-1"} {
						if r.commits(s+i) == 0 {
							t.Errorf("process %s%s committed nothing: the stage's partitions were not shared", s, i)
						}
					}
				}
			}
		})
	}
}

// Without transactions (offsets committed after the output, outside
// one), killing the build stage mid-run writes batches twice, and the
// audit says so: the check is what catches a broken exactly-once.
func TestStagesAtLeastOnceIsCaught(t *testing.T) {
	r := newRig(t, true)
	a := r.run(stages.Build, 3)
	if a.Exact() {
		t.Fatalf("three SIGKILLs of the build stage without transactions left the topics exact (%+v): the check cannot tell", a)
	}
	st := r.sink.Stats()
	t.Logf("caught: %s; the sink was posted %d messages again", strings.Join(a.Problems(), "; "), st.Duplicates)
	if a.Duplicates["built"] == 0 {
		t.Errorf("no duplicate batch in the built topic: %+v", a)
	}
	if a.Delivered <= r.expected {
		t.Errorf("outcomes count %d delivered of %d: the duplicates should show there too", a.Delivered, r.expected)
	}
}

// checkWireFormat checks that every record of the four topics is in the
// registry's wire format under the id logbook's registry gave the
// topic's schema, registered under "<topic>-value".
func (r *rig) checkWireFormat() {
	t := r.t
	ctx := context.Background()
	for i, topic := range r.topics.All() {
		schema := []string{stages.ChunkSchema, stages.CheckedSchema, stages.BatchSchema, stages.OutcomeSchema}[i]
		ss, err := r.reg.Lookup(ctx, topic+"-value", schema, false)
		if err != nil {
			t.Fatalf("%s-value: %v", topic, err)
		}
		recs, err := kafkabus.ReadRecords(ctx, r.bus, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			id, _, err := registry.SplitWire(rec.Value)
			if err != nil || id != ss.ID {
				t.Fatalf("%s@%d/%d: schema id %d (%v), the registry's is %d", topic, rec.Partition, rec.Offset, id, err, ss.ID)
			}
		}
	}
}
