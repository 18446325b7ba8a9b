package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/lab/cluster"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// builtinFaults are the faults every run may inject.
func builtinFaults() []Fault {
	return append([]Fault{
		killNode{kind: "kill-writer", replicas: false},
		killNode{kind: "kill-replica", replicas: true},
		pauseNode{},
		postgresFault{kind: "kill-postgres", crash: true},
		postgresFault{kind: "stop-postgres", crash: false},
		kafkaKill{},
	}, netFaults()...)
}

// killNode kills a write node or a replica with SIGKILL; the heal starts
// it again and waits until it answers (a replica: until it caught up).
type killNode struct {
	kind     string
	replicas bool
}

func (f killNode) Kind() string { return f.kind }
func (f killNode) Lane() string {
	if f.replicas {
		return laneReplicas
	}
	return laneWriters
}

func (f killNode) Inject(ctx context.Context, env *Env, rng *rand.Rand) (string, func(context.Context) error, error) {
	nodes := env.Cluster.Replicas
	if !f.replicas {
		// The kv nodes are write nodes too.
		nodes = append(append([]*cluster.Node(nil), env.Cluster.Writers...), env.KV...)
	}
	n := nodes[rng.IntN(len(nodes))]
	n.Kill()
	return n.Name, func(ctx context.Context) error { return restart(ctx, env, n) }, nil
}

// restart starts n again and waits until it answers. As a supervisor
// (systemd's Restart=always) would, it starts it again when it exits
// while starting — its store or broker down at that moment, under
// another lane's fault — every half second, for up to two minutes.
func restart(ctx context.Context, env *Env, n *cluster.Node) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := n.Restart(env.Binary); err != nil {
			return err
		}
		err := n.WaitReady(ctx, time.Until(deadline))
		if err == nil || n.Running() || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// pauseNode stops a node with SIGSTOP — a stop-the-world pause, as a
// long garbage collection or a frozen virtual machine makes — for longer
// than every timeout that decides who owns what, then resumes it with
// SIGCONT. It picks the write node that holds the publisher's lock when
// one does, the one whose ownership matters, else either write node.
// While it is stopped, its store sessions are ended from the server's side (what a server-side
// session or TCP timeout does to a client that stopped answering), so
// the lock passes to another write node, which publishes on; when the
// paused node wakes it still believes, for a moment, that it publishes —
// Kafka's transactional fencing must stop it, and the checks see any
// duplicate or gap in the topic it would cause.
type pauseNode struct{}

func (pauseNode) Kind() string { return "pause-node" }
func (pauseNode) Lane() string { return laneWriters }

func (pauseNode) Inject(ctx context.Context, env *Env, rng *rand.Rand) (string, func(context.Context) error, error) {
	holder := publisherHolder(ctx, env)
	n := (*cluster.Node)(nil)
	for _, w := range env.Cluster.Writers {
		if "logbook-"+w.Name == holder {
			n = w
		}
	}
	if n == nil {
		n = env.Cluster.Writers[rng.IntN(len(env.Cluster.Writers))]
	}
	if err := n.Signal(sigStop); err != nil {
		return n.Name, nil, err
	}
	stopped := time.Now()
	target := n.Name
	if n.Name == trimApp(holder) {
		target += " (publisher)"
	}
	// Past the lock's own ping timeout, the server ends the sessions.
	sleepCtx(ctx, min(2*time.Second, env.PauseTimeout/2))
	if err := terminate(ctx, env, "logbook-"+n.Name); err != nil {
		// PostgreSQL down in its own lane: its restart ends them.
		target += " (sessions not ended: PostgreSQL down)"
	}
	if n.Name == trimApp(holder) {
		// The lock should pass to another write node meanwhile.
		for time.Since(stopped) < env.PauseTimeout-time.Second && ctx.Err() == nil {
			if h := publisherHolder(ctx, env); h != "" && h != holder {
				target = n.Name + " (publisher; lock passed to " + trimApp(h) + ")"
				break
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	return target, func(ctx context.Context) error {
		if d := env.PauseTimeout - time.Since(stopped); d > 0 {
			sleepCtx(ctx, d)
		}
		if err := n.Signal(sigCont); err != nil {
			return err
		}
		return n.WaitReady(ctx, 2*time.Minute)
	}, nil
}

func trimApp(s string) string {
	if len(s) > len("logbook-") {
		return s[len("logbook-"):]
	}
	return s
}

// publisherHolder is the application_name of the write node's session
// that holds an advisory lock (the publisher's: the only one a write node
// holds for longer than a schema change, and writers restart in the
// pause's own lane), or "".
func publisherHolder(ctx context.Context, env *Env) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, env.Store.URL)
	if err != nil {
		return ""
	}
	defer conn.Close(context.Background())
	var name string
	_ = conn.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'logbook-writer-%' LIMIT 1`).Scan(&name)
	return name
}

// terminate ends the store sessions whose application_name is app.
func terminate(ctx context.Context, env *Env, app string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, env.Store.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	return err
}

// postgresFault crashes the store (SIGKILL to every PostgreSQL process:
// crash recovery from the write-ahead log on restart) or stops it
// cleanly (fast shutdown); the heal starts it again on the same data.
type postgresFault struct {
	kind  string
	crash bool
}

func (f postgresFault) Kind() string { return f.kind }
func (postgresFault) Lane() string   { return lanePostgres }

func (f postgresFault) Inject(ctx context.Context, env *Env, _ *rand.Rand) (string, func(context.Context) error, error) {
	if f.crash {
		env.Store.Kill()
	} else {
		env.Store.Halt()
	}
	return "postgres", func(ctx context.Context) error { return env.Store.Restart(ctx) }, nil
}

// kafkaKill kills the broker with SIGKILL; the heal starts it again on
// the same data directory.
type kafkaKill struct{}

func (kafkaKill) Kind() string { return "kill-kafka" }
func (kafkaKill) Lane() string { return laneBroker }

func (kafkaKill) Inject(ctx context.Context, env *Env, _ *rand.Rand) (string, func(context.Context) error, error) {
	env.Broker.Kill()
	return "kafka", func(ctx context.Context) error {
		if err := env.Broker.Restart(ctx); err != nil {
			return fmt.Errorf("restart the broker: %w", err)
		}
		return nil
	}, nil
}
