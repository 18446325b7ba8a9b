package httpreplica_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/httpreplica"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/devca"
)

// tlsPrimary serves /healthz over TLS with a server certificate of ca
// (expired if told), asking for client certificates of clientCA if given.
func tlsPrimary(t *testing.T, ca, clientCA *devca.CA, expired bool) string {
	t.Helper()
	dir := t.TempDir()
	leaf := devca.Leaf{Name: "primary", Hosts: []string{"127.0.0.1"}}
	if expired {
		leaf.NotBefore, leaf.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	}
	p, err := ca.Issue(leaf)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := p.Write(dir, "primary")
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.TLSConfig{CertFile: cert, KeyFile: key}
	if clientCA != nil {
		if cfg.ClientCAFile, err = clientCA.WriteCA(dir, "client-ca"); err != nil {
			t.Fatal(err)
		}
	}
	tc, err := server.LoadTLS(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok","head":7}`))
	})}
	go srv.Serve(tls.NewListener(ln, tc))
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

// The replica follows a TLS primary only when it trusts the primary's CA
// (and, where the primary asks for one, presents a certificate of the
// client CA): another CA, an expired server certificate, plaintext and a
// missing client certificate are all refused.
func TestReplicaVerifiesItsPrimary(t *testing.T) {
	ca, _ := devca.New("primary CA")
	clientCA, _ := devca.New("client CA")
	other, _ := devca.New("other CA")
	trust := func(ca *devca.CA, certs ...tls.Certificate) httpreplica.Options {
		return httpreplica.Options{TLS: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}
	}
	pair, _ := clientCA.Issue(devca.Leaf{Name: "replica"})
	replicaCert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	head := func(url string, o httpreplica.Options) error {
		s := httpreplica.NewWithOptions(url, "token-x", o)
		defer s.Close()
		h, err := s.Head(t.Context())
		if err == nil && h != 7 {
			t.Fatalf("head %d, want 7", h)
		}
		return err
	}

	url := tlsPrimary(t, ca, nil, false)
	if err := head(url, trust(ca)); err != nil {
		t.Fatalf("trusting the primary's CA: %v", err)
	}
	if err := head(url, trust(other)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("trusting another CA: %v, want a certificate error", err)
	}
	if err := head(url, httpreplica.Options{}); err == nil {
		t.Fatal("the system's roots accepted the test CA's certificate")
	}
	if err := head("http://"+strings.TrimPrefix(url, "https://"), trust(ca)); err == nil {
		t.Fatal("a plaintext request to the TLS primary was answered")
	}
	expired := tlsPrimary(t, ca, nil, true)
	if err := head(expired, trust(ca)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired primary certificate: %v, want refused", err)
	}

	mutual := tlsPrimary(t, ca, clientCA, false)
	if err := head(mutual, trust(ca)); err == nil {
		t.Fatal("a primary asking for a client certificate answered a replica without one")
	}
	if err := head(mutual, trust(ca, replicaCert)); err != nil {
		t.Fatalf("with the replica's client certificate: %v", err)
	}
}
