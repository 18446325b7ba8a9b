package loadtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Both of the load generator's clients, the pipelining one and the
// direct connection, speak TLS to an https server whose CA they are
// given, and refuse a server whose certificate another CA signed (here:
// the system's CAs, which did not sign httptest's certificate).
func TestClientsVerifyTheServer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "plaintext", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	good := NewClient(srv.URL, "tok", 1, 0).WithTLS(&tls.Config{RootCAs: pool})
	if code, _, err := good.Do(ctx, "GET", "/", ""); err != nil || code != 200 {
		t.Fatalf("pipelining client with the server's CA: %d %v", code, err)
	}
	k, err := good.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if code, _, err := k.Do(ctx, "GET", "/", ""); err != nil || code != 200 {
		t.Fatalf("direct connection with the server's CA: %d %v", code, err)
	}

	// The pipelining client retries a failed handshake without end:
	// Reachable is what refuses the server before a run.
	if err := good.Reachable(ctx); err != nil {
		t.Fatalf("Reachable with the server's CA: %v", err)
	}
	bad := NewClient(srv.URL, "tok", 1, 0).WithTLS(&tls.Config{})
	if err := bad.Reachable(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Reachable without the server's CA: %v, want a certificate error", err)
	}
	kb, _ := bad.NewConn()
	defer kb.Close()
	if _, _, err := kb.Do(ctx, "GET", "/", ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("direct connection without the server's CA: %v, want a certificate error", err)
	}
}
