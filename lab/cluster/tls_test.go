package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/loadtest"
)

// TestClusterTLS runs a write node, a replica, a replica fed over HTTPS by
// the write node (presenting a client certificate) and nginx with TLS on every
// HTTP hop (`logbook cluster --tls`) and drives a small write and read
// load through nginx over HTTPS, with no failure. Then each hop through
// nginx is shown to refuse what it must: a client that does not trust the
// cluster's CA, plaintext and an expired nginx certificate (client →
// nginx); a node certificate of another CA and no client certificate
// (nginx → node, answered 502), and a node whose certificate has expired
// or that speaks plain HTTP (502 too).
func TestClusterTLS(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	nginx := testenv.Nginx(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The HTTP-fed replica follows the write node over HTTPS, with a
	// client certificate: every node requires one.
	c, err := Start(ctx, Config{Binary: bin, Store: url, Writers: 1, Replicas: 1, HTTPReplicas: 1, ReplicaToken: "viewer-token",
		Dir: dir, Tokens: tokens, Nginx: nginx, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes() {
				t.Logf("%s log:\n%s", n.Name, tail(n.Log(), 3000))
			}
			b, _ := os.ReadFile(filepath.Join(dir, "nginx-error.log"))
			t.Logf("nginx error log:\n%s", tail(string(b), 3000))
		}
	}()
	if !strings.HasPrefix(c.URL, "https://") || !strings.HasPrefix(c.Nodes()[0].URL, "https://") {
		t.Fatalf("cluster %s, node %s: want https", c.URL, c.Nodes()[0].URL)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)

	// A small load through nginx, over HTTPS, trusting only the CA.
	w := loadtest.NewClient(c.URL, "planner-token", 4, 0).WithTLS(&tls.Config{RootCAs: roots})
	if err := w.Reachable(ctx); err != nil {
		t.Fatal(err)
	}
	wr, err := loadtest.RunWrite(ctx, w, loadtest.WriteConfig{Users: 4, Legs: 5, Waves: 2, Direct: true})
	if err != nil || wr.Failures > 0 || wr.Requests < 4*8 {
		t.Fatalf("write load over TLS: %+v %v", wr, err)
	}
	r := loadtest.NewClient(c.URL, "viewer-token", 2, 0).WithTLS(&tls.Config{RootCAs: roots})
	rr, err := loadtest.RunRead(ctx, r, loadtest.ReadConfig{Rate: 50, Ramp: time.Second, Hold: 2 * time.Second})
	if err != nil || rr.Failures > 0 || rr.Requests < 50 {
		t.Fatalf("read load over TLS: %+v %v", rr, err)
	}
	t.Logf("over TLS: %d commands, %d reads, no failure", wr.Requests, rr.Requests)

	get := func(client *http.Client, u string) (int, error) {
		res, err := client.Get(u + "/healthz")
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if code, err := get(trusting, c.URL); err != nil || code != 200 {
		t.Fatalf("/healthz through nginx: %d %v", code, err)
	}

	// client → nginx
	other, _ := devca.New("other CA")
	if _, err := get(&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: other.Pool()}}}, c.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v, want a certificate error", err)
	}
	if code, err := get(&http.Client{Timeout: 10 * time.Second}, "http://"+strings.TrimPrefix(c.URL, "https://")); err == nil && code == 200 {
		t.Fatal("nginx answered a plaintext request 200")
	}

	// A second nginx in front of the same nodes, with one setting
	// changed: what it answers shows the hop's refusal.
	variant := func(change func(n *nginxTLS)) string {
		t.Helper()
		n := *c.certs.nginx
		change(&n)
		v := &Cluster{cfg: c.cfg, Writers: c.Writers, Replicas: c.Replicas, certs: &certs{nginx: &n}}
		v.cfg.Dir, v.cfg.Addr = t.TempDir(), ""
		if err := v.startNginx(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(v.stopNginx)
		return v.URL
	}
	tmp := t.TempDir()
	otherCA, err := other.WriteCA(tmp, "other")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(trusting, variant(func(n *nginxTLS) { n.CA = otherCA })); err != nil || code != http.StatusBadGateway {
		t.Fatalf("nginx trusting another CA for the nodes: %d %v, want 502", code, err)
	}
	if code, err := get(trusting, variant(func(n *nginxTLS) { n.ClientCert, n.ClientKey = "", "" })); err != nil || code != http.StatusBadGateway {
		t.Fatalf("nginx without a client certificate: %d %v, want 502", code, err)
	}
	// nginx → a node serving an expired certificate, and → a node
	// speaking plain HTTP: both 502.
	expiredNode, err := c.certs.issue(devca.Leaf{Name: nodeName, Hosts: []string{nodeName, "127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	enc, enk, err := expiredNode.Write(tmp, "expired-node")
	if err != nil {
		t.Fatal(err)
	}
	for _, odd := range []struct {
		name string
		tls  []string
	}{{"expired", []string{"--tls-cert", enc, "--tls-key", enk}}, {"plaintext", nil}} {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		n := &Node{Name: odd.name + "-node", Addr: "127.0.0.1:" + strconv.Itoa(port), logPath: filepath.Join(tmp, odd.name+".log"),
			args: append([]string{"flights", "serve", "--data", filepath.Join(tmp, odd.name), "--addr", "127.0.0.1:" + strconv.Itoa(port), "--tokens", filepath.Join(dir, "tokens")}, odd.tls...)}
		if err := n.start(bin); err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if conn, err := net.Dial("tcp", n.Addr); err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) || !n.Running() {
				t.Fatalf("%s did not listen: %s", n.Name, n.Log())
			}
		}
		v := &Cluster{cfg: c.cfg, Writers: []*Node{n}, certs: c.certs}
		v.cfg.Dir, v.cfg.Addr = t.TempDir(), ""
		if err := v.startNginx(ctx); err != nil {
			t.Fatal(err)
		}
		code, err := get(trusting, v.URL)
		v.stopNginx()
		if err != nil || code != http.StatusBadGateway {
			t.Fatalf("nginx to a node of the right CA but %s: %d %v, want 502", odd.name, code, err)
		}
	}

	expired, err := c.certs.issue(devca.Leaf{Name: "nginx", Hosts: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ec, ek, err := expired.Write(tmp, "expired")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(trusting, variant(func(n *nginxTLS) { n.ServerCert, n.ServerKey = ec, ek })); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("nginx serving an expired certificate: %v, want refused as expired", err)
	}
}
