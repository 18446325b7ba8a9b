package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/internal/devca"
)

// tlsFiles is a CA and a server certificate for 127.0.0.1, on disk.
type tlsFiles struct {
	ca           *devca.CA
	dir          string
	caFile       string
	cert, key    string
	clientCAFile string
	clientCA     *devca.CA
}

func newTLSFiles(t *testing.T, serverLeaf devca.Leaf) *tlsFiles {
	t.Helper()
	f := &tlsFiles{dir: t.TempDir()}
	var err error
	if f.ca, err = devca.New("test CA"); err != nil {
		t.Fatal(err)
	}
	if f.clientCA, err = devca.New("test client CA"); err != nil {
		t.Fatal(err)
	}
	if serverLeaf.Name == "" {
		serverLeaf.Name, serverLeaf.Hosts = "server", []string{"127.0.0.1"}
	}
	p, err := f.ca.Issue(serverLeaf)
	if err != nil {
		t.Fatal(err)
	}
	if f.cert, f.key, err = p.Write(f.dir, "server"); err != nil {
		t.Fatal(err)
	}
	if f.caFile, err = f.ca.WriteCA(f.dir, "ca"); err != nil {
		t.Fatal(err)
	}
	if f.clientCAFile, err = f.clientCA.WriteCA(f.dir, "client-ca"); err != nil {
		t.Fatal(err)
	}
	return f
}

// client is an HTTPS client trusting roots and presenting certs.
func client(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
}

func issue(t *testing.T, ca *devca.CA, l devca.Leaf) tls.Certificate {
	t.Helper()
	p, err := ca.Issue(l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func status(t *testing.T, c *http.Client, url, token string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// A TLS server answers a client that trusts its CA, over HTTPS; a client
// of another CA, a plaintext client and a client of an expired server
// certificate get no answer from the handler.
func TestTLSRefusesWrongCAPlaintextAndExpired(t *testing.T) {
	f := newTLSFiles(t, devca.Leaf{})
	url, _, _ := started(t, Config{Name: "tls", Addr: "127.0.0.1:0", TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key}}, http.NotFoundHandler())
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving line says %s, want https://", url)
	}
	if code, err := status(t, client(f.ca.Pool()), url+"/healthz", ""); err != nil || code != 200 {
		t.Fatalf("/healthz over TLS with the right CA: %d %v", code, err)
	}
	other, _ := devca.New("other CA")
	if _, err := status(t, client(other.Pool()), url+"/healthz", ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v, want a certificate error", err)
	}
	plain := "http://" + strings.TrimPrefix(url, "https://")
	if code, err := status(t, &http.Client{Timeout: 5 * time.Second}, plain+"/healthz", ""); err == nil && code == 200 {
		t.Fatal("a plaintext request was answered 200")
	}

	expired := newTLSFiles(t, devca.Leaf{Name: "server", Hosts: []string{"127.0.0.1"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	url2, _, _ := started(t, Config{Name: "tls", Addr: "127.0.0.1:0", TLS: &TLSConfig{CertFile: expired.cert, KeyFile: expired.key}}, http.NotFoundHandler())
	if _, err := status(t, client(expired.ca.Pool()), url2+"/healthz", ""); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired server certificate: %v, want refused as expired", err)
	}
}

// With a client CA, a connection without a client certificate, with one
// of another CA or with an expired one is refused; a verified certificate
// carrying a role authenticates as that role without a token, one
// without a role does not.
func TestMutualTLS(t *testing.T) {
	const planner auth.Role = "planner"
	f := newTLSFiles(t, devca.Leaf{})
	tokens := auth.NewTokens([]auth.Role{planner})
	mux := http.NewServeMux()
	mux.Handle("/plan", tokens.RequireRole(planner, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	url, _, _ := started(t, Config{Name: "mtls", Addr: "127.0.0.1:0", Tokens: tokens,
		TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.clientCAFile}}, mux)

	if _, err := status(t, client(f.ca.Pool()), url+"/healthz", ""); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	other, _ := devca.New("other CA")
	if _, err := status(t, client(f.ca.Pool(), issue(t, other, devca.Leaf{Name: "c", Role: "planner"})), url+"/plan", ""); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
	old := issue(t, f.clientCA, devca.Leaf{Name: "c", Role: "planner", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if _, err := status(t, client(f.ca.Pool(), old), url+"/plan", ""); err == nil {
		t.Fatal("an expired client certificate was accepted")
	}
	plainURL := "http://" + strings.TrimPrefix(url, "https://")
	if code, err := status(t, &http.Client{Timeout: 5 * time.Second}, plainURL+"/healthz", ""); err == nil && code == 200 {
		t.Fatal("a plaintext request was answered 200")
	}

	withRole := client(f.ca.Pool(), issue(t, f.clientCA, devca.Leaf{Name: "planner-client", Role: "planner"}))
	if code, err := status(t, withRole, url+"/healthz", ""); err != nil || code != 200 {
		t.Fatalf("/healthz with a client certificate: %d %v", code, err)
	}
	if code, err := status(t, withRole, url+"/plan", ""); err != nil || code != 200 {
		t.Fatalf("a planner's certificate on a planner's route: %d %v, want 200", code, err)
	}
	noRole := client(f.ca.Pool(), issue(t, f.clientCA, devca.Leaf{Name: "proxy"}))
	if code, err := status(t, noRole, url+"/plan", ""); err != nil || code != 401 {
		t.Fatalf("a certificate without a role, no token: %d %v, want 401", code, err)
	}
	unknown := client(f.ca.Pool(), issue(t, f.clientCA, devca.Leaf{Name: "c", Role: "root"}))
	if code, err := status(t, unknown, url+"/plan", ""); err != nil || code != 401 {
		t.Fatalf("a certificate of a role the server does not know: %d %v, want 401", code, err)
	}
	viewer := client(f.ca.Pool(), issue(t, f.clientCA, devca.Leaf{Name: "c", Role: "viewer"}))
	if code, err := status(t, viewer, url+"/plan", ""); err != nil || code != 403 {
		t.Fatalf("a viewer's certificate on a planner's route: %d %v, want 403", code, err)
	}
}

// A renewed certificate is served to new connections once its files
// change, while a keep-alive connection opened before keeps working; a
// pair that does not match is refused and the old one kept; SIGHUP
// reloads too.
func TestTLSReload(t *testing.T) {
	f := newTLSFiles(t, devca.Leaf{})
	url, logged, _ := started(t, Config{Name: "reload", Addr: "127.0.0.1:0",
		TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key, ReloadEvery: 20 * time.Millisecond}}, http.NotFoundHandler())
	served := func(c *http.Client) string {
		t.Helper()
		res, err := c.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.TLS.PeerCertificates[0].Subject.CommonName
	}
	keep := client(f.ca.Pool())
	keep.Transport.(*http.Transport).MaxConnsPerHost = 1
	if got := served(keep); got != "server" {
		t.Fatalf("served %q", got)
	}

	write := func(p devca.Pair) {
		t.Helper()
		// Written beside and renamed, as a renewal tool does, so the
		// server never reads half a file.
		tmp := t.TempDir()
		c, k, err := p.Write(tmp, "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(k, f.key); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(c, f.cert); err != nil {
			t.Fatal(err)
		}
	}
	renewed, _ := f.ca.Issue(devca.Leaf{Name: "renewed", Hosts: []string{"127.0.0.1"}})
	write(renewed)
	waitFor(t, func() bool { return strings.Contains(logged.String(), "TLS certificate reloaded") })
	if got := served(client(f.ca.Pool())); got != "renewed" {
		t.Fatalf("a new connection after the renewal was served %q, want renewed", got)
	}
	// The connection opened before is still open, and still works: a
	// new one would have been served the renewed certificate.
	if got := served(keep); got != "server" {
		t.Fatalf("the keep-alive client saw %q: its connection from before the renewal was dropped", got)
	}

	// A certificate with the key of another: refused, the old pair kept.
	mismatched, _ := f.ca.Issue(devca.Leaf{Name: "mismatched", Hosts: []string{"127.0.0.1"}})
	mismatched.KeyPEM = renewed.KeyPEM
	write(mismatched)
	waitFor(t, func() bool { return strings.Contains(logged.String(), "TLS certificate not reloaded") })
	if got := served(client(f.ca.Pool())); got != "renewed" {
		t.Fatalf("after a bad pair a new connection was served %q, want the old renewed", got)
	}
}

// SIGHUP reloads the pair even when the files' stamps are not looked at.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	f := newTLSFiles(t, devca.Leaf{})
	url, logged, _ := started(t, Config{Name: "hup", Addr: "127.0.0.1:0",
		TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key, ReloadEvery: -1}}, http.NotFoundHandler())
	renewed, _ := f.ca.Issue(devca.Leaf{Name: "after-hup", Hosts: []string{"127.0.0.1"}})
	if _, _, err := renewed.Write(f.dir, "server"); err != nil {
		t.Fatal(err)
	}
	p, _ := os.FindProcess(os.Getpid())
	waitFor(t, func() bool {
		_ = p.Signal(syscall.SIGHUP)
		return strings.Contains(logged.String(), "TLS certificate reloaded")
	})
	res, err := client(f.ca.Pool()).Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.TLS.PeerCertificates[0].Subject.CommonName; got != "after-hup" {
		t.Fatalf("after SIGHUP served %q", got)
	}
}

// Bad files are refused before the server listens, each with what is
// wrong.
func TestLoadTLSErrors(t *testing.T) {
	f := newTLSFiles(t, devca.Leaf{})
	other, _ := f.ca.Issue(devca.Leaf{Name: "other"})
	_, otherKey, _ := other.Write(t.TempDir(), "other")
	ctx := t.Context()
	for _, c := range []struct {
		name string
		cfg  TLSConfig
		want string
	}{
		{"no key", TLSConfig{CertFile: f.cert}, "both"},
		{"missing", TLSConfig{CertFile: filepath.Join(f.dir, "none"), KeyFile: f.key}, "no such file"},
		{"mismatch", TLSConfig{CertFile: f.cert, KeyFile: otherKey}, "does not match"},
		{"client CA not PEM", TLSConfig{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.key}, "no PEM certificate"},
	} {
		if _, err := LoadTLS(ctx, c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met within 10 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// With Coalesce the answers' TLS records leave through the coalescing
// connection: requests on one kept connection are all answered, and the
// handler still sees the TLS state.
func TestTLSWithCoalesce(t *testing.T) {
	f := newTLSFiles(t, devca.Leaf{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			http.Error(w, "no TLS state", http.StatusInternalServerError)
		}
	})
	url, _, _ := started(t, Config{Name: "coalesce", Addr: "127.0.0.1:0", Coalesce: true, TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key}}, h)
	c := client(f.ca.Pool())
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	for i := range 20 {
		if code, err := status(t, c, url+"/x", ""); err != nil || code != 200 {
			t.Fatalf("request %d: %d %v", i, code, err)
		}
	}
}

// A client that speaks at most TLS 1.1 is refused in the handshake; the
// same client allowed TLS 1.2 is answered. GODEBUG=tls10server=1 lowers
// Go's own default minimum to TLS 1.0, as an operator's environment
// might: the server's explicit minimum must hold regardless.
func TestTLSRefusesTLS11Client(t *testing.T) {
	t.Setenv("GODEBUG", "tls10server=1")
	f := newTLSFiles(t, devca.Leaf{})
	url, _, _ := started(t, Config{Name: "tls", Addr: "127.0.0.1:0", TLS: &TLSConfig{CertFile: f.cert, KeyFile: f.key}}, http.NotFoundHandler())
	versioned := func(max uint16) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: f.ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: max}}}
	}
	if code, err := status(t, versioned(tls.VersionTLS12), url+"/healthz", ""); err != nil || code != 200 {
		t.Fatalf("a TLS 1.2 client: %d %v", code, err)
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		code, err := status(t, versioned(v), url+"/healthz", "")
		if err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Fatalf("a client of at most %s: %d %v, want refused for its protocol version", tls.VersionName(v), code, err)
		}
	}
}
