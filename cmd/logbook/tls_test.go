package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/devca"
)

// Every serving command refuses bad TLS flags as bad usage (exit 2),
// saying what is wrong, before it opens a store or listens.
func TestServingCommandsRefuseBadTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, err := devca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := ca.Issue(devca.Leaf{Name: "a", Hosts: []string{"127.0.0.1"}})
	p2, _ := ca.Issue(devca.Leaf{Name: "b", Hosts: []string{"127.0.0.1"}})
	cert, _, err := p1.Write(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := p2.Write(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"flights", "serve", "--data", filepath.Join(dir, "f")},
		{"tickets", "serve", "--data", filepath.Join(dir, "t")},
		{"kv", "serve", "--data", filepath.Join(dir, "kv")},
		{"notify", "sink"},
		{"notify", "serve", "--data", filepath.Join(dir, "n"), "--users-db", "postgres://127.0.0.1:1/users",
			"--push-url", "http://127.0.0.1:1/deliver", "--email-url", "http://127.0.0.1:1/deliver"},
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", cert}, "--tls-cert and --tls-key go together"},
		{"unreadable", []string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", otherKey}, "no such file"},
		{"key of another certificate", []string{"--tls-cert", cert, "--tls-key", otherKey}, "does not match"},
		{"client CA not a certificate", []string{"--tls-cert", cert, "--tls-key", filepath.Join(dir, "a.key"), "--tls-client-ca", otherKey}, "no PEM certificate"},
	} {
		for _, cmd := range commands {
			t.Run(c.name+"/"+strings.Join(cmd[:2], " "), func(t *testing.T) {
				t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
				code, _, stderr := runCLI(t, append(append([]string{}, cmd...), c.args...)...)
				if code != 2 || !strings.Contains(stderr, c.want) {
					t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, c.want)
				}
			})
		}
	}
	code, _, stderr := runCLI(t, "flights", "serve", "--data", filepath.Join(dir, "f"), "--follow-ca", cert)
	if code != 2 || !strings.Contains(stderr, "--replica-of") {
		t.Fatalf("--follow-ca without --replica-of: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "flights", "serve", "--replica-of", "https://127.0.0.1:1", "--replica-token", "tok-12345678", "--follow-ca", otherKey)
	if code != 2 || !strings.Contains(stderr, "no PEM certificate") {
		t.Fatalf("--follow-ca of a key: exit %d, %q", code, stderr)
	}
}

// startNamedServer runs the binary's command args in this process until the
// test ends and returns the URL its "serving" line names.
func startNamedServer(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{stdout: io.Discard, stderr: &stderr, getenv: os.Getenv}, append(args, "--log-format", "json"))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error(name, "did not stop")
		}
	})
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == name+" serving" {
				return l.URL
			}
		}
		select {
		case code := <-done:
			t.Fatalf("%v exited %d before serving:\n%s", args, code, stderr.String())
		default:
		}
	}
	t.Fatalf("no %q line:\n%s", name+" serving", stderr.String())
	return ""
}

// Through the binary's flags: a primary serving mutual TLS takes a
// command from a client whose certificate carries the planner role, with
// no token; a replica over HTTP follows it with --follow-ca and its own
// client certificate, and without them cannot.
func TestServeTLSAndReplicaOverTLS(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner")
	dir := t.TempDir()
	ca, _ := devca.New("server CA")
	clientCA, _ := devca.New("client CA")
	sp, _ := ca.Issue(devca.Leaf{Name: "primary", Hosts: []string{"127.0.0.1"}})
	cert, key, err := sp.Write(dir, "primary")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.WriteCA(dir, "ca")
	clientCAFile, _ := clientCA.WriteCA(dir, "client-ca")
	rp, _ := clientCA.Issue(devca.Leaf{Name: "replica"})
	rcert, rkey, _ := rp.Write(dir, "replica")
	pp, _ := clientCA.Issue(devca.Leaf{Name: "importer", Role: "planner"})
	planner, err := pp.TLS()
	if err != nil {
		t.Fatal(err)
	}

	primary := startNamedServer(t, "logbook", "flights", "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCAFile)
	if !strings.HasPrefix(primary, "https://") {
		t.Fatalf("primary at %s", primary)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{planner}}}}
	res, err := client.Post(primary+"/api/rotations", "application/json", strings.NewReader(`{"id":"R1"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("a command with a planner's certificate and no token: %d, want 201", res.StatusCode)
	}

	head := func(replica string) (int, uint64) {
		res, err := http.Get(replica + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var h struct{ Head uint64 }
		_ = json.NewDecoder(res.Body).Decode(&h)
		return res.StatusCode, h.Head
	}
	replica := startNamedServer(t, "logbook", "flights", "serve", "--replica-of", primary, "--replica-token", "viewer-token", "--addr", "127.0.0.1:0",
		"--follow-ca", caFile, "--follow-cert", rcert, "--follow-key", rkey)
	if code, h := head(replica); code != 200 || h < 1 {
		t.Fatalf("the replica with --follow-ca and its certificate: /healthz %d, head %d; want 200 and the primary's head", code, h)
	}
	blind := startNamedServer(t, "logbook", "flights", "serve", "--replica-of", primary, "--replica-token", "viewer-token", "--addr", "127.0.0.1:0",
		"--follow-cert", rcert, "--follow-key", rkey)
	if code, _ := head(blind); code == 200 {
		t.Fatal("a replica that does not trust the primary's CA says it is healthy")
	}
	noCert := startNamedServer(t, "logbook", "flights", "serve", "--replica-of", primary, "--replica-token", "viewer-token", "--addr", "127.0.0.1:0",
		"--follow-ca", caFile)
	if code, _ := head(noCert); code == 200 {
		t.Fatal("a replica without a client certificate says it is healthy")
	}
}
