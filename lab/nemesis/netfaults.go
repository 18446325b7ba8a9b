package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"time"

	"github.com/logbook/logbook/lab/cluster"
	"github.com/logbook/logbook/lab/faultnet"
)

// The network faults stand a faultnet proxy (a fault-injecting TCP proxy
// in this process) between each node and PostgreSQL, and between nginx
// and each node. A proxy, not network namespaces and `ip link`: the
// runs are not root, and this machine has neither iptables nor the netem
// kernel module; a proxy sees byte streams, so it models partitions,
// resets and latency of TCP connections, not packet loss.

// PartitionHold is how long a partition lasts at least: past the
// publisher lock's 5 s ping and the clients' 3 s timeout, so that what a
// timeout decides is decided while the link is cut.
const PartitionHold = 6 * time.Second

// PostgresLatency is what latency-postgres adds to every round trip.
const PostgresLatency = 200 * time.Millisecond

// proxyStore puts a proxy between node and the store: the URL it
// returns is raw's with the proxy's address (application_name kept).
func (e *Env) proxyStore(node, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	p, err := faultnet.Listen(u.Host)
	if err != nil {
		return "", err
	}
	e.PGProxies[node] = p
	u.Host = p.Addr()
	return u.String(), nil
}

// proxyNginx puts a proxy between nginx and n.
func (e *Env) proxyNginx(n *cluster.Node) (string, error) {
	p, err := faultnet.Listen(n.Addr)
	if err != nil {
		return "", err
	}
	e.NginxProxies[n.Name] = p
	return p.Addr(), nil
}

func (e *Env) closeProxies() {
	for _, m := range []map[string]*faultnet.Proxy{e.PGProxies, e.NginxProxies, e.KafkaProxies} {
		for _, p := range m {
			_ = p.Close()
		}
	}
}

func pick(m map[string]*faultnet.Proxy, rng *rand.Rand) (string, *faultnet.Proxy, error) {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("no proxy to fault")
	}
	slices.Sort(names)
	n := names[rng.IntN(len(names))]
	return n, m[n], nil
}

// netFault is a fault of one node's link, through its proxy.
type netFault struct {
	kind, lane string
	// on: the links it acts on, "postgres" (a node's to PostgreSQL),
	// "nginx" (nginx's to a node) or "kafka" (a node's to the broker).
	on string
	// do breaks the link, hold is how long it stays broken at least.
	do   func(*faultnet.Proxy) error
	hold time.Duration
}

func (f netFault) Kind() string { return f.kind }
func (f netFault) Lane() string { return f.lane }

func (f netFault) Inject(ctx context.Context, env *Env, rng *rand.Rand) (string, func(context.Context) error, error) {
	m := map[string]map[string]*faultnet.Proxy{"postgres": env.PGProxies, "nginx": env.NginxProxies, "kafka": env.KafkaProxies}[f.on]
	name, p, err := pick(m, rng)
	if err != nil {
		return "", nil, err
	}
	if err := f.do(p); err != nil {
		return name, nil, err
	}
	start := time.Now()
	return name, func(ctx context.Context) error {
		if d := f.hold - time.Since(start); d > 0 {
			sleepCtx(ctx, d)
		}
		return p.Heal()
	}, nil
}

func netFaults() []Fault {
	return []Fault{
		// A node cut off from PostgreSQL: its sessions hang, its lock's
		// ping times out; the other write node takes over the publisher.
		netFault{kind: "partition-postgres", lane: laneStoreLinks, on: "postgres", do: (*faultnet.Proxy).Cut, hold: PartitionHold},
		// Every connection of a node to PostgreSQL reset at once.
		netFault{kind: "reset-postgres", lane: laneStoreLinks, on: "postgres", do: (*faultnet.Proxy).Reset},
		// 200 ms more on every round trip from a node to PostgreSQL.
		netFault{kind: "latency-postgres", lane: laneStoreLinks, on: "postgres", do: func(p *faultnet.Proxy) error { return p.Latency(PostgresLatency) }, hold: PartitionHold},
		// nginx cut off from a node: its requests to it hang until
		// nginx's or the client's timeout.
		netFault{kind: "partition-proxy", lane: laneProxyLinks, on: "nginx", do: (*faultnet.Proxy).Cut, hold: PartitionHold},
		// A node cut off from the broker: a write node's publisher
		// stalls (another takes the lock only if the store ends its
		// session), the Kafka-fed replica's consumer waits.
		netFault{kind: "partition-kafka", lane: laneBroker, on: "kafka", do: (*faultnet.Proxy).Cut, hold: PartitionHold},
	}
}
