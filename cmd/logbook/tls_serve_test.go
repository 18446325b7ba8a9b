//go:build unix

package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// testServerCert makes a test CA and a server certificate it issues for
// 127.0.0.1, written into dir: the CA, and the certificate's and key's
// files.
func testServerCert(t *testing.T, dir string) (ca *devca.CA, cert, key string) {
	t.Helper()
	ca, err := devca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ca.Issue(devca.Leaf{Name: "server", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cert, key, err = sp.Write(dir, "server"); err != nil {
		t.Fatal(err)
	}
	return ca, cert, key
}

// Each serving command besides flights (TestServeTLSAndReplicaOverTLS)
// serves HTTPS end to end through its --tls-cert and --tls-key: its
// "serving" line names an https:// URL; a client trusting the test CA
// gets /metrics with a token and is refused it without one; a plaintext
// request on the same port gets no answer from the service. notify serve
// delivers to an HTTPS notify sink it verifies with --deliver-ca.
func TestServingCommandsServeHTTPS(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,sender-token:sender")
	dir := t.TempDir()
	ca, cert, key := testServerCert(t, dir)
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	get := func(t *testing.T, c *http.Client, url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// checkHTTPS is what every command must do over HTTPS.
	checkHTTPS := func(t *testing.T, url string) {
		t.Helper()
		if !strings.HasPrefix(url, "https://") {
			t.Fatalf("serving at %s, want https://", url)
		}
		if code, body := get(t, client, url+"/metrics", "viewer-token"); code != 200 || !strings.Contains(body, "# TYPE") {
			t.Fatalf("GET /metrics over HTTPS with a token: %d %.200s", code, body)
		}
		if code, _ := get(t, client, url+"/metrics", ""); code != http.StatusUnauthorized {
			t.Fatalf("GET /metrics over HTTPS without a token: %d, want 401", code)
		}
		// Go's TLS server answers an HTTP request with a bare 400 and
		// closes; the service's handler never sees it.
		plain := "http://" + strings.TrimPrefix(url, "https://")
		if code, body := get(t, http.DefaultClient, plain+"/metrics", "viewer-token"); code == 200 || strings.Contains(body, "# TYPE") {
			t.Fatalf("GET /metrics in plaintext on the HTTPS port: %d %.200s", code, body)
		}
		// Nor does a client that does not trust the CA get through.
		if code, msg := get(t, &http.Client{Timeout: 10 * time.Second}, url+"/metrics", "viewer-token"); code != 0 || !strings.Contains(msg, "certificate") {
			t.Fatalf("GET /metrics trusting only the system's CAs: %d %s", code, msg)
		}
	}
	for _, c := range []struct {
		name, serving string
		args          []string
	}{
		{"tickets serve", "logbook tickets", []string{"tickets", "serve", "--data", filepath.Join(dir, "t")}},
		{"kv serve", "logbook kv", []string{"kv", "serve", "--data", filepath.Join(dir, "kv")}},
		{"notify sink", "logbook notify sink", []string{"notify", "sink"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkHTTPS(t, startNamedServer(t, c.serving, append(c.args, tlsArgs...)...))
		})
	}
	t.Run("notify serve to an HTTPS sink", func(t *testing.T) {
		sinkURL := startNamedServer(t, "logbook notify sink", append([]string{"notify", "sink"}, tlsArgs...)...)
		url, schema, slot, _ := usersDB(t, userscdc.Population{Users: 40, Clubs: 4, Seed: 1})
		base := startNamedServer(t, "logbook notify", append([]string{"notify", "serve", "--data", filepath.Join(dir, "n"), "--state", filepath.Join(dir, "ns"),
			"--users-db", url, "--users-schema", schema, "--slot", slot,
			"--push-url", sinkURL + sink.Path, "--email-url", sinkURL + sink.Path, "--deliver-ca", caFile}, tlsArgs...)...)
		checkHTTPS(t, base)
		body, _ := json.Marshal(map[string]any{"type": "like_update", "club_id": 2, "sender": "coach", "timestamp": time.Now().UTC().Add(-time.Minute), "to_club": true})
		req, _ := http.NewRequest("POST", base+"/api/notifications", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sender-token")
		req.Header.Set("Idempotency-Key", "tls-1")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("send over HTTPS: %d, want 202", res.StatusCode)
		}
		var st sink.Stats
		for start := time.Now(); st.UniqueKeys == 0; time.Sleep(50 * time.Millisecond) {
			code, raw := get(t, client, sinkURL+"/stats", "")
			if code == 200 {
				if err := json.Unmarshal([]byte(raw), &st); err != nil {
					t.Fatal(err)
				}
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("nothing delivered to the HTTPS sink: /stats %d %s", code, raw)
			}
		}
		if st.Calls == 0 || st.FailedCalls != 0 {
			t.Fatalf("sink stats %+v", st)
		}
	})
}
