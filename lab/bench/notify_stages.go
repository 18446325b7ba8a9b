package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/stages"
)

// ModeStages runs the pipeline as the published system was deployed:
// preference, build and deliver as separate processes connected by Kafka.
const ModeStages = "stages"

// StagesAudit is the stage deployment's own exactness check: the stage
// topics read committed, every unit once (stages.Audit), and what the
// kills did.
type StagesAudit struct {
	stages.Audit
	Procs   int    `json:"procs_per_stage"`
	Killed  string `json:"killed_stage,omitempty"`
	Kills   int    `json:"kills"`
	Resends int64  `json:"resends"` // messages posted again after an aborted delivery poll, dropped by the sink by key
}

// stagesTarget is `logbook notify stage` run as Procs child processes
// per stage, logbook's schema registry served from this process, and a
// stages.Sender as the send handler.
type stagesTarget struct {
	cfg     NotifyConfig
	bus     kafkabus.Config
	topics  stages.Topics
	sender  *stages.Sender
	tmp     string
	regSrv  *http.Server
	closers []func()
	log     *slog.Logger

	mu    sync.Mutex
	procs map[string]*stageProcess // by instance
	kills int
	wg    sync.WaitGroup
}

type stageProcess struct {
	stage, instance string
	cmd             *exec.Cmd
	stderr          *bytes.Buffer
	exited          chan error
}

func startStages(ctx context.Context, cfg NotifyConfig, sinkURL string) (_ target, err error) {
	if cfg.Exe == "" {
		return nil, errors.New("bench notify: stages mode needs the logbook executable")
	}
	bcfg, prefix, err := kafkabus.ParseURL(cfg.Bus)
	if err != nil {
		return nil, fmt.Errorf("bench notify: --bus: %w", err)
	}
	t := &stagesTarget{cfg: cfg, bus: bcfg, topics: stages.TopicsOf(prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)),
		log: cfg.Log, procs: map[string]*stageProcess{}}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if t.tmp, err = os.MkdirTemp("", "logbook-bench-stages-"); err != nil {
		return nil, err
	}
	// logbook's registry, served as a write node serves it.
	st, err := pebblestore.Open(t.tmp+"/registry", pebblestore.Options{})
	if err != nil {
		return nil, err
	}
	t.closers = append(t.closers, func() { _ = st.Close() })
	reg, err := registry.Open(ctx, st, registry.Options{})
	if err != nil {
		return nil, err
	}
	t.closers = append(t.closers, func() { _ = reg.Close() })
	const token = "bench-schema-admin"
	tokens, err := auth.ParseEnv(token+":schema-admin", registry.Roles())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t.regSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.regSrv.Serve(ln) }()
	regURL := "http://" + ln.Addr().String() + "/registry"

	if err := stages.EnsureTopics(ctx, bcfg, t.topics, int32(max(12, cfg.StageProcs))); err != nil {
		return nil, err
	}
	busURL := "kafka://" + strings.Join(bcfg.Brokers, ",") + "/" + t.topics.Prefix
	if i := strings.Index(cfg.Bus, "?"); i >= 0 {
		busURL += cfg.Bus[i:]
	}
	for _, s := range stages.Names {
		for i := range cfg.StageProcs {
			p := &stageProcess{stage: s, instance: s + "-" + strconv.Itoa(i)}
			args := []string{"notify", "stage", s, "--registry", regURL, "--instance", p.instance, "--log-level", "warn"}
			if s == stages.Deliver {
				args = append(args, "--push-url", sinkURL, "--email-url", sinkURL)
			} else {
				args = append(args, "--users-schema", cfg.Schema)
			}
			if cfg.AtLeastOnce {
				args = append(args, "--unsafe-at-least-once")
			}
			env := []string{"LOGBOOK_BUS=" + busURL, "LOGBOOK_REGISTRY_TOKEN=" + token, "LOGBOOK_USERS_DB=" + cfg.UsersDB}
			p.cmd = exec.Command(cfg.Exe, args...)
			p.cmd.Env = append(os.Environ(), env...)
			if err := t.run(p); err != nil {
				return nil, err
			}
		}
	}
	schemas, err := registry.NewClient(regURL, token)
	if err != nil {
		return nil, err
	}
	if t.sender, err = stages.NewSender(ctx, bcfg, schemas, t.topics, "bench"); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := stages.WaitStable(sctx, bcfg, t.topics, cfg.StageProcs); err != nil {
		return nil, fmt.Errorf("bench notify: %w: %s", err, t.stderrs())
	}
	return t, nil
}

// run starts p's command.
func (t *stagesTarget) run(p *stageProcess) error {
	p.stderr, p.exited = &bytes.Buffer{}, make(chan error, 1)
	p.cmd.Stderr = &limitedBuffer{b: p.stderr, max: 64 << 10}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("bench notify: start stage %s: %w", p.instance, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.mu.Lock()
	t.procs[p.instance] = p
	t.mu.Unlock()
	return nil
}

func (t *stagesTarget) stderrs() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, p := range t.procs {
		select {
		case err := <-p.exited:
			p.exited <- err
			out = append(out, fmt.Sprintf("%s exited (%v): %s", p.instance, err, strings.TrimSpace(p.stderr.String())))
		default:
		}
	}
	return strings.Join(out, "; ")
}

// kill SIGKILLs the first process of stage after delay and starts it
// again under the same instance name, as a supervisor would.
func (t *stagesTarget) kill(stage string, delay time.Duration) {
	t.wg.Go(func() {
		time.Sleep(delay)
		t.mu.Lock()
		p := t.procs[stage+"-0"]
		t.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-p.exited
		np := &stageProcess{stage: stage, instance: p.instance, cmd: exec.Command(p.cmd.Path, p.cmd.Args[1:]...)}
		np.cmd.Env = p.cmd.Env
		if err := t.run(np); err != nil {
			t.log.Error("bench notify: restart a killed stage process", "instance", p.instance, "err", err)
			return
		}
		t.mu.Lock()
		t.kills++
		t.mu.Unlock()
		t.log.Info("bench notify: stage process SIGKILLed and restarted", "instance", p.instance, "after", delay)
	})
}

func (t *stagesTarget) send(ctx context.Context, id string, ids []int64, at time.Time) (sendAnswer, error) {
	if err := t.failed(); err != nil {
		return sendAnswer{}, err
	}
	if t.cfg.KillStage != "" && len(ids) >= t.cfg.KillMin {
		t.kill(t.cfg.KillStage, t.cfg.KillAfter)
	}
	req := &notify.Request{ID: id, Type: NotifyType, ClubID: 1, Sender: notifySender, Timestamp: at, ToUsers: ids}
	if _, err := t.sender.Send(ctx, req, 1000); err != nil {
		return sendAnswer{}, err
	}
	return sendAnswer{id: id}, nil
}

// failed is a stage process that exited by itself.
func (t *stagesTarget) failed() error {
	if s := t.stderrs(); s != "" {
		return fmt.Errorf("bench notify: %s", s)
	}
	return nil
}

func (t *stagesTarget) finish(context.Context, *sendAnswer) error {
	t.wg.Wait() // a kill's restart is done before the next request
	return t.failed()
}

func (t *stagesTarget) metricsMismatches(context.Context, []sentRequest) (*int64, error) {
	return nil, nil // the stage deployment aggregates no metrics
}

// audit reads the stage topics once the pipeline has drained.
func (t *stagesTarget) audit(ctx context.Context, resends int64) (*StagesAudit, error) {
	codecs := stages.NewCodecs()
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := stages.AuditTopics(ctx, t.bus, t.topics, codecs, "")
		if err != nil {
			return nil, err
		}
		if a.Complete() || time.Now().After(deadline) {
			t.mu.Lock()
			defer t.mu.Unlock()
			return &StagesAudit{Audit: a, Procs: t.cfg.StageProcs, Killed: t.cfg.KillStage, Kills: t.kills, Resends: resends}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (t *stagesTarget) close() {
	t.wg.Wait()
	t.mu.Lock()
	for _, p := range t.procs {
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	t.mu.Unlock()
	if t.sender != nil {
		t.sender.Close()
	}
	if t.regSrv != nil {
		_ = t.regSrv.Close()
	}
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	if cl, err := kafkabus.NewClient(t.bus); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, t.topics.All()...)
		cancel()
		cl.Close()
	}
	if t.tmp != "" {
		os.RemoveAll(t.tmp)
	}
}
