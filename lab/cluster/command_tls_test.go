package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/loadtest"
)

// TestClusterCommandTLS runs `logbook cluster --tls` as an operator
// would — the binary, its own PostgreSQL, its own identity provider, a
// replica fed by Kafka — and drives a write and a read load through nginx over HTTPS with the
// JSON Web Tokens it minted. Then it checks each hop it added: the
// replica, fed by Kafka over TLS and SCRAM only, catches up; every
// node's connection to PostgreSQL is TLS (pg_stat_ssl), the store refuses
// a plaintext connection and one that trusts another CA, and a token of
// another issuer, an expired one and one signed by another key are
// answered 401 with the reason.
func TestClusterCommandTLS(t *testing.T) {
	nginx := testenv.Nginx(t)
	if nginx != "/usr/sbin/nginx" {
		t.Skip("logbook cluster runs /usr/sbin/nginx; LOGBOOK_TEST_NGINX names another")
	}
	if _, err := postgresBin(); err != nil {
		if os.Getenv("LOGBOOK_REQUIRE_EXTERNAL") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokFile, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	// The replica is fed by the bus, the TLS broker's SASL_SSL listener
	// (TLS and SCRAM-SHA-512): the publisher and the replica's consumer
	// take the bus URL as given, and the listener takes nothing else.
	cmd := exec.Command(bin, "cluster", "--tls", "--writers", "1", "--replicas", "1", "--addr", "127.0.0.1:0", "--bus", kafkaTLSBus(t),
		"--dir", filepath.Join(dir, "c"), "--tokens", tokFile, "--run-dir", filepath.Join(dir, "run"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		for range lines {
		}
		select {
		case err := <-exited:
			return err
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			return <-exited
		}
	}
	defer func() {
		_ = stop()
		if t.Failed() {
			t.Logf("stderr:\n%s", tail(stderr.String(), 3000))
			for _, n := range []string{"writer-1", "replica-1"} {
				b, _ := os.ReadFile(filepath.Join(dir, "c", n+".log"))
				t.Logf("%s log:\n%s", n, tail(string(b), 3000))
			}
		}
	}()

	// What the command prints, up to its last node.
	got := map[string]string{}
	for !strings.HasPrefix(got["last"], "replica-1") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("cluster --tls exited before it was up; stderr:\n%s", stderr.String())
			}
			t.Log(l)
			f := strings.Fields(l)
			switch {
			case strings.HasPrefix(l, "nginx at "):
				got["nginx"] = f[2]
			case len(f) > 1 && f[0] == "CA":
				got["ca"] = f[1]
			case len(f) > 1 && f[0] == "postgres":
				got["postgres"] = f[1]
			case len(f) > 2 && f[1] == "JWT":
				got[f[0]] = f[2]
			case len(f) > 8 && f[0] == "issuer":
				got["key"] = f[8]
			case len(f) > 1 && (f[0] == "writer-1" || f[0] == "replica-1"):
				got[f[0]] = f[1]
			}
			got["last"] = l
		case <-ctx.Done():
			t.Fatal("cluster --tls not up in time")
		}
	}
	for _, k := range []string{"nginx", "ca", "postgres", "planner", "viewer", "key", "writer-1", "replica-1"} {
		if got[k] == "" {
			t.Fatalf("cluster --tls printed no %s", k)
		}
	}
	if !strings.HasPrefix(got["nginx"], "https://") || !strings.Contains(got["postgres"], "sslmode=verify-full") {
		t.Fatalf("nginx at %s, postgres at %s: want https and sslmode=verify-full", got["nginx"], got["postgres"])
	}
	jwt := func(role string) string {
		b, err := os.ReadFile(got[role])
		if err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(string(b))
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("%s token %q: not a JSON Web Token", role, tok)
		}
		return tok
	}
	planner, viewer := jwt("planner"), jwt("viewer")
	pem, err := os.ReadFile(got["ca"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	url := got["nginx"]

	// A few seconds of load through nginx over HTTPS, with the JWTs.
	w := loadtest.NewClient(url, planner, 4, 0).WithTLS(&tls.Config{RootCAs: roots})
	if err := w.Reachable(ctx); err != nil {
		t.Fatal(err)
	}
	wr, err := loadtest.RunWrite(ctx, w, loadtest.WriteConfig{Users: 4, Legs: 5, Waves: 2, Direct: true})
	if err != nil || wr.Failures > 0 || wr.Requests < 4*8 {
		t.Fatalf("write load with a JWT over TLS: %+v %v", wr, err)
	}
	r := loadtest.NewClient(url, viewer, 2, 0).WithTLS(&tls.Config{RootCAs: roots})
	rr, err := loadtest.RunRead(ctx, r, loadtest.ReadConfig{Rate: 50, Ramp: time.Second, Hold: 2 * time.Second})
	if err != nil || rr.Failures > 0 || rr.Requests < 50 {
		t.Fatalf("read load with a JWT over TLS: %+v %v", rr, err)
	}
	t.Logf("through cluster --tls with JWTs: %d commands, %d reads, no failure", wr.Requests, rr.Requests)
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("cluster --tls warned of URLs that ask for TLS:\n%s", stderr.String())
	}

	// The Kafka hop: the replica, fed only by the bus over TLS and
	// SCRAM, catches up with the writer's log. Asked directly, with the
	// harness's client certificate (the nodes require one).
	direct, err := server.ClientTLS(got["ca"], filepath.Join(dir, "c", "tls", "harness.crt"), filepath.Join(dir, "c", "tls", "harness.key"))
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: direct}}
	// metric is the largest value node's /metrics gives name.
	metric := func(node, name string) uint64 {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", got[node]+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+viewer)
		res, err := nodeClient.Do(req)
		if err != nil {
			t.Fatalf("%s /metrics: %v", node, err)
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var max uint64
		found := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %q", node, sc.Text())
				}
				found, max = true, maxOf(max, uint64(v))
			}
		}
		if !found {
			t.Fatalf("%s /metrics (%s): no %s", node, res.Status, name)
		}
		return max
	}
	// The writer has published its whole log over TLS and SCRAM, and
	// the replica's view, which only Kafka's records move on (the store
	// fills gaps behind them), has applied it.
	want := metric("writer-1", "logbook_head_position")
	if want == 0 {
		t.Fatalf("the writer's log is empty after %d commands", wr.Requests)
	}
	for {
		pub, applied := metric("writer-1", "logbook_bus_published_position"), metric("replica-1", "logbook_projection_position")
		if pub >= want && applied >= want {
			t.Logf("the writer's log, %d events, published over TLS and SCRAM and applied by the Kafka-fed replica", want)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("writer at %d: published %d, the Kafka-fed replica at %d", want, pub, applied)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The store hop: every node's connection is TLS, and the server
	// takes nothing else.
	conn, err := pgx.Connect(ctx, got["postgres"])
	if err != nil {
		t.Fatalf("verify-full to the cluster's PostgreSQL: %v", err)
	}
	var tlsConns, conns int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
		WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`).Scan(&tlsConns, &conns); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if conns < 2 || tlsConns != conns {
		t.Fatalf("the nodes' connections to PostgreSQL: %d of %d over TLS; want all, and at least 2", tlsConns, conns)
	}
	plain := strings.SplitN(got["postgres"], "?", 2)[0] + "?sslmode=disable"
	if c, err := pgx.Connect(ctx, plain); err == nil {
		c.Close(ctx)
		t.Fatal("the cluster's PostgreSQL took a plaintext connection")
	}
	other, _ := devca.New("other CA")
	otherCA, err := other.WriteCA(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := strings.SplitN(got["postgres"], "?", 2)[0] + "?sslmode=verify-full&sslrootcert=" + otherCA
	if c, err := pgx.Connect(ctx, wrongCA); err == nil || !strings.Contains(err.Error(), "certificate") {
		if c != nil {
			c.Close(ctx)
		}
		t.Fatalf("verify-full trusting another CA: %v, want a certificate error", err)
	}

	// Tokens the nodes must refuse, through nginx.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	ask := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/session", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return res.StatusCode, string(b)
	}
	if code, body := ask(viewer); code != http.StatusOK {
		t.Fatalf("the cluster's viewer JWT: %d %s, want 200", code, body)
	}
	idp, err := LoadIdP(got["key"], IdPIssuer, IdPAudience)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := LoadIdP(got["key"], "https://idp.example.com", IdPAudience)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := &IdP{Issuer: IdPIssuer, Audience: IdPAudience}
	if p, err := newIdP(t.TempDir(), &certs{authority: other}); err != nil {
		t.Fatal(err)
	} else {
		p.close()
		otherKey.key, otherKey.kid = p.key, p.kid
	}
	past := time.Now().Add(-2 * time.Hour)
	for _, c := range []struct {
		name, reason string
		idp          *IdP
		claims       Claims
	}{
		{"another issuer", "another issuer", stranger, Claims{Roles: []string{"viewer"}}},
		{"expired", "expired", idp, Claims{Roles: []string{"viewer"}, IssuedAt: past, NotBefore: past, Expiry: past.Add(time.Hour)}},
		{"another audience", "another audience", idp, Claims{Roles: []string{"viewer"}, Audience: "someone-else"}},
		{"another key", "key the issuer does not publish", otherKey, Claims{Roles: []string{"viewer"}}},
	} {
		tok, err := c.idp.Mint(c.claims)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := ask(tok); code != http.StatusUnauthorized || !strings.Contains(body, c.reason) {
			t.Errorf("a token of %s: %d %s, want 401 saying %q", c.name, code, body, c.reason)
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("cluster --tls on SIGINT: %v; stderr:\n%s", err, stderr.String())
	}
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
