// Package cluster runs logbook on several processes of one machine, the
// way docs/deployment.md lays it out on several: write nodes sharing a
// PostgreSQL store, read replicas, and nginx in front, routing commands by
// aggregate id with consistent hashing and reads round-robin. The cluster
// test and the scaling benchmark use it; `logbook cluster` starts one.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/query"
	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/lab/cgroup"
	"github.com/logbook/logbook/services/flights/httpapi"
)

// Config describes a cluster.
type Config struct {
	Binary   string // the logbook binary
	Store    string // postgres:// URL shared by every node
	Bus      string // kafka://host:port/topic, or empty
	Writers  int
	Replicas int
	Dir      string // logs, tokens, nginx's files
	Addr     string // where nginx listens, host:port (port 0: any free one)
	Tokens   string // "token role" lines; the nodes and nginx's clients use them
	// Nginx is the nginx binary; default /usr/sbin/nginx.
	Nginx string
	// ExtraArgs are added to every node's serve command line.
	ExtraArgs []string
	// Env is added to every node's environment.
	Env []string
	// WriterViews keeps a validation view on every write node too. By
	// default, with replicas to answer the queries, write nodes run
	// commands only.
	WriterViews bool
	// TLS puts TLS on every HTTP hop, with certificates of a throwaway
	// CA made in Dir/tls: clients speak HTTPS to nginx, nginx speaks
	// HTTPS to the nodes, verifying them with the CA and presenting a
	// client certificate of its own, which the nodes ask for (mutual
	// TLS). Cluster.CAFile is the CA clients trust.
	TLS bool
	// Authority, if set, is the CA that signs the certificates of a TLS
	// cluster (nil: a throwaway one made by Start): the one that signed
	// the certificate of a store StartPostgresTLS started, say.
	Authority *devca.CA
	// JWT (with TLS) runs the cluster's own identity provider
	// (Cluster.IdP): a key set served over HTTPS, which every node is
	// told to verify bearer JSON Web Tokens against (--jwks-url,
	// --issuer, --audience), besides Tokens. The nodes trust the
	// cluster's CA for the key set only (--jwks-ca): the system's roots
	// stay theirs for everything else, a TLS broker of Bus say.
	JWT bool
	// Run, if not nil, puts every process in a control group of its
	// own (BeginRun) and records it for clean-up; NodeCPUs and ProxyCPUs
	// are then the CPU quotas of each node and of nginx (0: none).
	Run       *Run
	NodeCPUs  float64
	ProxyCPUs float64
	// StoreFor, if set, gives each node's store URL by the node's name
	// (writer-1, replica-2, …) instead of Store: a fault-injecting
	// proxy can then stand between one node and the store.
	StoreFor func(node string) string
	// HTTPReplicas are replicas fed over HTTP (flights serve
	// --replica-of), started after the others, named replica-N too,
	// and served by nginx with them. Each follows the URL ReplicaOf
	// returns given the write nodes (nil: the first write node's),
	// with ReplicaToken, a token of the viewer role.
	HTTPReplicas int
	ReplicaOf    func(writers []*Node) string
	ReplicaToken string
	// NginxTo, if set, gives the host:port nginx reaches a node at,
	// from the node (default its Addr): a fault-injecting proxy can
	// then stand between nginx and one node.
	NginxTo func(n *Node) string
	// BusFor, if set, gives each node's bus URL by the node's name
	// instead of Bus: a node can then reach the broker through a
	// listener and a proxy of its own.
	BusFor func(node string) string
}

// Node is one logbook process.
type Node struct {
	Name string
	Addr string
	// URL is the node's base URL, https:// with Config.TLS.
	URL      string
	ReadOnly bool
	// CommandsOnly: a write node without a validation view.
	CommandsOnly bool
	// HTTPFed: a replica fed over HTTP by another node, not by the
	// store or the bus.
	HTTPFed bool
	args    []string
	env     []string
	logPath string
	client  *http.Client // for WaitReady
	group   *cgroup.Group
	run     *Run

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a running cluster.
type Cluster struct {
	cfg      Config
	URL      string // nginx's base URL
	Writers  []*Node
	Replicas []*Node
	nginx    *exec.Cmd
	nginxEnd chan struct{}
	// CAFile is the CA that signs every certificate of a TLS cluster:
	// what its clients trust (empty without Config.TLS).
	CAFile string
	// ClientTLS is what a client of the cluster's nodes, nginx included,
	// needs: the CA, and a client certificate the nodes take (it
	// carries no role: requests still need a token). Nil without TLS.
	ClientTLS *tls.Config
	// IdP is the cluster's identity provider, with Config.JWT (else
	// nil): Mint signs tokens the nodes take.
	IdP   *IdP
	certs *certs
}

// Start starts the nodes and nginx and waits until they answer. Replicas
// answer only once their view has caught up, so nginx sends them nothing
// before.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nginx == "" {
		cfg.Nginx = "/usr/sbin/nginx"
	}
	if cfg.Writers < 1 || cfg.Replicas < 0 || cfg.HTTPReplicas < 0 {
		return nil, errors.New("cluster: want at least one write node and no negative replica count")
	}
	if cfg.JWT && !cfg.TLS {
		return nil, errors.New("cluster: JWT needs TLS: the identity provider serves its keys over HTTPS")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	tokens := filepath.Join(cfg.Dir, "tokens")
	if err := os.WriteFile(tokens, []byte(cfg.Tokens), 0o600); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	client := &http.Client{Timeout: 5 * time.Second}
	scheme := "http://"
	if cfg.TLS {
		var err error
		if c.certs, err = makeCerts(filepath.Join(cfg.Dir, "tls"), cfg.Authority); err != nil {
			return nil, err
		}
		c.CAFile, c.ClientTLS = c.certs.ca, c.certs.clientTLS
		client.Transport = &http.Transport{TLSClientConfig: c.ClientTLS}
		scheme = "https://"
	}
	var jwtArgs []string
	if cfg.JWT {
		var err error
		if c.IdP, err = newIdP(filepath.Join(cfg.Dir, "tls"), c.certs); err != nil {
			return nil, err
		}
		// Start has succeeded when nginx runs; an error before that
		// closes the identity provider (c.Stop closes it too, which is
		// harmless).
		defer func() {
			if c.nginx == nil {
				c.IdP.close()
			}
		}()
		jwtArgs = []string{"--jwks-url", c.IdP.URL, "--jwks-ca", c.certs.ca, "--issuer", c.IdP.Issuer, "--audience", c.IdP.Audience, "--roles-claim", "roles"}
	}
	for i := range cfg.Writers + cfg.Replicas + cfg.HTTPReplicas {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), env: append([]string(nil), cfg.Env...)}
		n.URL, n.client = scheme+n.Addr, client
		n.args = []string{"flights", "serve", "--addr", n.Addr, "--tokens", tokens}
		if cfg.TLS {
			n.args = append(n.args, "--tls-cert", c.certs.nodeCert, "--tls-key", c.certs.nodeKey, "--tls-client-ca", c.certs.ca)
		}
		n.args = append(n.args, jwtArgs...)
		switch {
		case i >= cfg.Writers+cfg.Replicas:
			n.Name = nameOf(i, cfg)
			n.ReadOnly, n.HTTPFed = true, true
			of := ""
			if cfg.ReplicaOf != nil {
				of = cfg.ReplicaOf(c.Writers)
			} else {
				of = c.Writers[0].URL
			}
			// The token goes in the environment, like the URLs below.
			n.env = append(n.env, "LOGBOOK_REPLICA_OF="+of, "LOGBOOK_REPLICA_TOKEN="+cfg.ReplicaToken)
			if cfg.TLS {
				n.args = append(n.args, "--follow-ca", c.certs.ca, "--follow-cert", c.certs.followCert, "--follow-key", c.certs.followKey)
			}
			c.Replicas = append(c.Replicas, n)
		default:
			// The store's URL and the bus's, which may carry a
			// password, go in the environment: a command line is
			// visible to every user in ps.
			store := cfg.Store
			if cfg.StoreFor != nil {
				store = cfg.StoreFor(nameOf(i, cfg))
			}
			n.env = append(n.env, "LOGBOOK_STORE="+store)
			bus := cfg.Bus
			if cfg.BusFor != nil {
				bus = cfg.BusFor(nameOf(i, cfg))
			}
			if bus != "" {
				n.env = append(n.env, "LOGBOOK_BUS="+bus)
			}
		}
		switch {
		case n.HTTPFed: // named and listed above
		case i < cfg.Writers:
			n.Name = nameOf(i, cfg)
			if cfg.Replicas+cfg.HTTPReplicas > 0 && !cfg.WriterViews {
				n.args = append(n.args, "--commands-only")
				n.CommandsOnly = true
			}
			c.Writers = append(c.Writers, n)
		default:
			n.Name = nameOf(i, cfg)
			n.ReadOnly = true
			n.args = append(n.args, "--read-only")
			c.Replicas = append(c.Replicas, n)
		}
		n.args = append(n.args, cfg.ExtraArgs...)
		n.logPath = filepath.Join(cfg.Dir, n.Name+".log")
		if cfg.Run != nil {
			kind := "node"
			if n.ReadOnly {
				kind = "replica"
			}
			g, err := cfg.Run.Group(n.Name, kind, cfg.NodeCPUs)
			if err != nil {
				return nil, err
			}
			n.group, n.run = g, cfg.Run
			n.env = cgroup.GoEnv(n.env, cfg.NodeCPUs)
		}
	}
	for _, n := range c.Nodes() {
		if err := n.start(cfg.Binary); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes() {
		if err := n.WaitReady(ctx, 120*time.Second); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.startNginx(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// nameOf is the name Start gives its i-th node.
func nameOf(i int, cfg Config) string {
	if i < cfg.Writers {
		return fmt.Sprintf("writer-%d", i+1)
	}
	return fmt.Sprintf("replica-%d", i-cfg.Writers+1)
}

// Nodes lists the write nodes, then the replicas.
func (c *Cluster) Nodes() []*Node {
	return append(append([]*Node(nil), c.Writers...), c.Replicas...)
}

// Stop ends every process.
func (c *Cluster) Stop() {
	c.stopNginx()
	var wg sync.WaitGroup
	for _, n := range c.Nodes() {
		wg.Go(func() { n.Stop() })
	}
	wg.Wait()
	c.IdP.close()
}

// stopNginx ends nginx, if it runs.
func (c *Cluster) stopNginx() {
	if c.nginx != nil && c.nginx.Process != nil {
		_ = c.nginx.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.nginxEnd:
		case <-time.After(5 * time.Second):
			_ = c.nginx.Process.Kill()
			<-c.nginxEnd
		}
	}
}

func (n *Node) start(binary string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := groupCommand(n.group, binary, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), n.env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start %s: %w", n.Name, err)
	}
	if n.run != nil {
		n.run.Track(n.Name, cmd.Process.Pid)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// groupCommand runs argv in group g from its first instruction (see
// cgroup.Group.Wrap), or as it is without a group.
func groupCommand(g *cgroup.Group, name string, args ...string) *exec.Cmd {
	if g == nil {
		return exec.Command(name, args...)
	}
	argv := g.Wrap(append([]string{name}, args...)...)
	return exec.Command(argv[0], argv[1:]...)
}

// NewProcess is a node of another kind than Start's: binary run with
// args and env (on Restart), logging to logPath, answering /healthz at
// addr. It is not started; Restart, Kill, Stop, Signal and WaitReady
// work on it as on the cluster's own nodes.
func NewProcess(name, addr string, args, env []string, logPath string) *Node {
	return &Node{Name: name, Addr: addr, URL: "http://" + addr, args: args, env: env, logPath: logPath,
		client: &http.Client{Timeout: 5 * time.Second}}
}

// Restart starts a node that was killed or stopped, with the same
// command line.
func (n *Node) Restart(binary string) error { return n.start(binary) }

// Kill ends the node with SIGKILL: no shutdown, no flush.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Stop ends the node with SIGTERM, and SIGKILL after a grace period.
func (n *Node) Stop() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Signal sends sig to the node's process (SIGSTOP and SIGCONT pause and
// resume it); it does nothing if the node does not run.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return nil
	}
	return n.cmd.Process.Signal(sig)
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Log returns the node's output so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// WaitReady waits until the node answers /healthz.
func (n *Node) WaitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if !n.Running() {
			return fmt.Errorf("cluster: %s exited; its log:\n%s", n.Name, tail(n.Log(), 2000))
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/healthz", nil)
		if res, err := n.client.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s not ready after %v; its log:\n%s", n.Name, limit, tail(n.Log(), 2000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// nginxConf routes commands and aggregate reads to the write nodes by
// aggregate id, with consistent hashing, so an aggregate usually stays
// cached on one node (correctness does not depend on it: the store's
// optimistic concurrency catches a stale cache); view queries, live
// streams and stream queries go round-robin to the replicas. A
// request that fails to reach a node goes to the next one — commands too
// (non_idempotent): the API's Idempotency-Key makes a retried command
// harmless, and a node that died mid-request may or may not have
// committed it. A command without an Idempotency-Key is not retried: it
// might be applied twice.
var nginxConf = template.Must(template.New("nginx").Parse(`# written by logbook's cluster package
worker_processes 2;
daemon off;
master_process on;
{{if .Root}}user root;{{end}}
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/nginx-error.log warn;
events { worker_connections 8192; }
http {
	access_log off;
	client_body_temp_path {{.Dir}}/nginx-body;
	proxy_temp_path {{.Dir}}/nginx-proxy;
	fastcgi_temp_path {{.Dir}}/nginx-fastcgi;
	uwsgi_temp_path {{.Dir}}/nginx-uwsgi;
	scgi_temp_path {{.Dir}}/nginx-scgi;
	client_max_body_size 64m;

	# Uploads and their status polls go to one node: an import's
	# progress lives in the memory of the node that runs it.
	map $uri $aggregate {
		{{range .Affinity}}"~{{.Regexp}}" {{.Key}};
		{{end}}default $request_id;
	}
	map $http_idempotency_key $keyed {
		"" 0;
		default 1;
	}
	map "$request_method $uri" $pool {
		{{if .Replicas}}{{range .ReplicaRoutes}}"~^{{.}}" replicas;
		{{end}}{{end}}default writers;
	}
	# A server's weight is its points on the hash ring (weight × 160).
	# With nginx's 160 a node's arc of the ring is off its share by about
	# 1/√160 ≈ 8 %, and the busiest of four nodes served up to 14 % more
	# requests than the average (docs/benchmarks.md); 1,600 points
	# bring that part down to about 2.5 %.
	upstream writers {
		hash $aggregate consistent;
		{{range .Writers}}server {{.}} weight=10 max_fails=1 fail_timeout=2s;
		{{end}}keepalive 256;
		keepalive_requests 1000000;
	}
	{{if .Replicas}}upstream replicas {
		{{range .Replicas}}server {{.}} max_fails=1 fail_timeout=2s;
		{{end}}keepalive 256;
		keepalive_requests 1000000;
	}{{end}}
	server {
		listen {{.Listen}} backlog=4096{{if .TLS}} ssl{{end}};
		{{with .TLS}}# TLS from the clients, ended here; TLS again to the nodes,
		# whose certificates the CA must have signed for the name
		# {{.NodeName}}, with a client certificate of nginx's own.
		ssl_certificate {{.ServerCert}};
		ssl_certificate_key {{.ServerKey}};
		ssl_protocols TLSv1.2 TLSv1.3;
		proxy_ssl_protocols TLSv1.2 TLSv1.3;
		proxy_ssl_verify on;
		proxy_ssl_verify_depth 2;
		proxy_ssl_trusted_certificate {{.CA}};
		proxy_ssl_name {{.NodeName}};
		{{if .ClientCert}}proxy_ssl_certificate {{.ClientCert}};
		proxy_ssl_certificate_key {{.ClientKey}};{{end}}
		proxy_ssl_session_reuse on;
		{{end}}
		# Load generators pipeline many requests per connection; nginx's
		# default of closing one after 1000 requests fails those in flight.
		keepalive_requests 1000000;
		keepalive_timeout 300s;
		proxy_http_version 1.1;
		proxy_set_header Connection "";
		proxy_set_header Host $host;
		proxy_next_upstream_tries 4;
		proxy_connect_timeout 2s;
		proxy_read_timeout 1h;
		proxy_buffering off;
		# A command is retried on the next node only when it carries an
		# Idempotency-Key (then a second delivery is answered as a
		# duplicate); reads are always retried.
		location / {
			error_page 418 = @keyed;
			if ($keyed) { return 418; }
			proxy_pass {{.Scheme}}://$pool;
			proxy_next_upstream error timeout http_502 http_503;
		}
		location @keyed {
			proxy_pass {{.Scheme}}://$pool;
			proxy_next_upstream error timeout http_502 http_503 non_idempotent;
		}
	}
}
`))

// affinity is a line of nginx's map from a request path to the key that
// picks its write node.
type affinity struct{ Regexp, Key string }

// proxyRoutes derives nginx's routing from the route tables: commands and
// aggregate reads hash on their first path wildcard (the aggregate id);
// pinned routes all go to one node; view queries go to the replicas
// (as "METHOD path" regular expressions).
func proxyRoutes(specs []httpkit.Spec) (aff []affinity, replicas []string) {
	seen := map[string]bool{}
	add := func(a affinity) {
		if !seen[a.Regexp] {
			seen[a.Regexp] = true
			aff = append(aff, a)
		}
	}
	for _, s := range specs {
		if s.Pinned {
			add(affinity{s.PathRegexp(""), "pinned"})
		}
	}
	for _, s := range specs {
		if !s.Pinned && (s.Kind == httpkit.Command || s.Kind == httpkit.AggregateRead) && len(s.Wildcards()) > 0 {
			add(affinity{s.PathRegexp("id"), "$id"})
		}
	}
	for _, s := range specs {
		if s.Kind == httpkit.ViewQuery {
			replicas = append(replicas, s.Method+" "+strings.TrimPrefix(s.PathRegexp(""), "^"))
		}
	}
	return aff, replicas
}

func (c *Cluster) startNginx(ctx context.Context) error {
	listen := c.cfg.Addr
	if listen == "" || strings.HasSuffix(listen, ":0") {
		port, err := freePort()
		if err != nil {
			return err
		}
		listen = "127.0.0.1:" + strconv.Itoa(port)
	}
	aff, replicaRoutes := proxyRoutes(append(httpkit.Specs(httpapi.Routes), query.Route))
	data := struct {
		Dir, Listen       string
		Root              bool
		Writers, Replicas []string
		Affinity          []affinity
		ReplicaRoutes     []string
		Scheme            string
		TLS               *nginxTLS
	}{Dir: c.cfg.Dir, Listen: listen, Root: os.Geteuid() == 0, Affinity: aff, ReplicaRoutes: replicaRoutes, Scheme: "http"}
	if c.certs != nil {
		data.Scheme = "https"
		data.TLS = c.certs.nginx
	}
	to := func(n *Node) string {
		if c.cfg.NginxTo != nil {
			return c.cfg.NginxTo(n)
		}
		return n.Addr
	}
	for _, n := range c.Writers {
		data.Writers = append(data.Writers, to(n))
	}
	for _, n := range c.Replicas {
		data.Replicas = append(data.Replicas, to(n))
	}
	var b strings.Builder
	if err := nginxConf.Execute(&b, data); err != nil {
		return err
	}
	conf := filepath.Join(c.cfg.Dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(c.cfg.Dir, "nginx.out"))
	if err != nil {
		return err
	}
	var group *cgroup.Group
	if c.cfg.Run != nil {
		g, err := c.cfg.Run.Group("nginx", "proxy", c.cfg.ProxyCPUs)
		if err != nil {
			logf.Close()
			return err
		}
		group = g
	}
	cmd := groupCommand(group, c.cfg.Nginx, "-c", conf, "-p", c.cfg.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start nginx (%s; scripts/test.sh installs it): %w", c.cfg.Nginx, err)
	}
	if c.cfg.Run != nil {
		c.cfg.Run.Track("nginx", cmd.Process.Pid)
	}
	c.nginx, c.nginxEnd = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(c.nginxEnd) }()
	c.URL = data.Scheme + "://" + listen
	deadline := time.Now().Add(10 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-c.nginxEnd:
			out, _ := os.ReadFile(filepath.Join(c.cfg.Dir, "nginx-error.log"))
			out2, _ := os.ReadFile(filepath.Join(c.cfg.Dir, "nginx.out"))
			return fmt.Errorf("cluster: nginx exited: %s%s", out, out2)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("cluster: nginx did not listen within 10s")
		}
	}
}
