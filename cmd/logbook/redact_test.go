//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// keyMarker stands for a private key's contents: no log line, no stderr
// and no answer may show it.
const keyMarker = "key-contents-never-shown-3c8e"

// A --tls-key file that is not a key — its text a marker, or a PEM block
// whose body is — is refused at start without its contents in the error;
// a key file replaced by such a file under a running server is not
// reloaded, and the log line saying so shows none of it either, nor do
// the server's answers.
func TestTLSKeyContentsStayOutOfOutput(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	dir := t.TempDir()
	ca, cert, key := testServerCert(t, dir)
	bad := map[string]string{
		"text":      keyMarker + "\n",
		"pem body":  "-----BEGIN EC PRIVATE KEY-----\n" + keyMarker + "\n-----END EC PRIVATE KEY-----\n",
		"pem bytes": "-----BEGIN EC PRIVATE KEY-----\n" + "a2V5LWNvbnRlbnRzLW5ldmVyLXNob3duLTNjOGU=" + "\n-----END EC PRIVATE KEY-----\n", // base64 of the marker
	}
	for name, contents := range bad {
		t.Run(name, func(t *testing.T) {
			badKey := filepath.Join(t.TempDir(), "bad.key")
			if err := os.WriteFile(badKey, []byte(contents), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{
				{"kv", "serve", "--data", filepath.Join(dir, "kv")},
				{"notify", "sink"},
			} {
				code, stdout, stderr := runCLI(t, append(cmd, "--tls-cert", cert, "--tls-key", badKey)...)
				if code != 2 || !strings.Contains(stderr, badKey) {
					t.Errorf("%v with a bad key: exit %d, %q; want 2 naming the file", cmd, code, stderr)
				}
				if strings.Contains(stdout+stderr, keyMarker) {
					t.Errorf("%v showed the key file's contents: %s%s", cmd, stdout, stderr)
				}
			}
		})
	}

	// Under a running server the key file is overwritten with the marker
	// and the server told to reload.
	live := filepath.Join(dir, "live.key")
	raw, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(live, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startServing(t, "kv", "serve", "--data", filepath.Join(dir, "kv2"), "--tls-cert", cert, "--tls-key", live)
	if err := os.WriteFile(live, []byte(bad["pem body"]), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test's own handler keeps a SIGHUP that came before the
	// server's from ending the process; the server also looks at the
	// files every 10 s.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); !strings.Contains(logs.String(), "TLS certificate not reloaded"); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no line saying the bad key was not reloaded:\n%s", logs.String())
		}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	var bodies strings.Builder
	for _, path := range []string{"/healthz", "/metrics", "/api/kv/absent"} {
		for _, tok := range []string{"", "viewer-token"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatalf("the server after a bad key was written: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			bodies.Write(b)
		}
	}
	if strings.Contains(logs.String(), keyMarker) || strings.Contains(bodies.String(), keyMarker) {
		t.Fatalf("the key file's contents were shown:\n%s\n%s", logs.String(), bodies.String())
	}
}

// saslMarker is a Kafka SASL password no output may show.
const saslMarker = "sasl-pw-never-shown-91d4"

// A Kafka SASL password never shows: not when a bus URL carries it (a
// usage error that names the parameter, not its value), and not when the
// broker refuses it — the node's log of the refusal, its stderr and its
// answers (/healthz, /metrics) hold none of it.
func TestKafkaSASLPasswordStaysOutOfOutput(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	for _, bus := range []string{
		"kafka://127.0.0.1:1/t?tls=true&sasl=SCRAM-SHA-512&sasl_user=u&sasl_password=" + saslMarker,
		"kafka://u:" + saslMarker + "@127.0.0.1:1/t?tls=true&sasl=SCRAM-SHA-512",
	} {
		code, stdout, stderr := runCLI(t, "flights", "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--bus", bus)
		if code != 2 || strings.Contains(stdout+stderr, saslMarker) {
			t.Errorf("--bus with a password in it: exit %d, %s%s; want 2 without the password", code, stdout, stderr)
		}
	}

	b := testenv.KafkaTLS(t)
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(saslMarker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(kafkabus.PasswordEnv, "")
	bus := "kafka://" + b.SASLSSL + "/logbook-redact?" + url.Values{
		"tls_ca": {b.CA}, "sasl": {kafkabus.ScramSHA512}, "sasl_user": {b.User}, "sasl_password_file": {pwFile}}.Encode()
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{stdout: io.Discard, stderr: &stderr, getenv: os.Getenv},
			[]string{"flights", "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--log-format", "json", "--bus", bus})
	}()
	var base string
	exited := false
	for start := time.Now(); base == "" && !exited && time.Since(start) < 60*time.Second; time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "logbook serving" {
				base = l.URL
			}
		}
		select {
		case code := <-done:
			exited = true
			if code == 0 {
				t.Fatalf("serve with a wrong SASL password exited 0:\n%s", stderr.String())
			}
		default:
		}
	}
	var bodies strings.Builder
	if base != "" {
		// Wait until the publisher has tried the broker and logged its
		// refusal (checked below), within a deadline for a loaded machine.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !strings.Contains(stderr.String(), "SASL_AUTHENTICATION_FAILED"); {
			time.Sleep(50 * time.Millisecond)
		}
		for _, path := range []string{"/healthz", "/metrics"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("Authorization", "Bearer viewer-token")
			if res, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				bodies.Write(b)
			}
		}
	}
	cancel()
	if !exited {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}
	out := stderr.String() + bodies.String()
	if strings.Contains(out, saslMarker) {
		t.Fatalf("the SASL password was shown:\n%s", out)
	}
	if !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("nothing says the broker refused the password; the refusal was not exercised:\n%s", out)
	}
	t.Logf("refusal as shown: %.1500s", out)
}
