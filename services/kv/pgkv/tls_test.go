package pgkv_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/pgkv"
)

// The backend passes the conformance suite (smaller) over
// sslmode=verify-full against the TLS-only test server, and refuses it
// given a CA that did not sign the server's certificate.
func TestConformanceOverVerifiedTLS(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Backend {
		u, _ := testenv.PostgresTLSSchemaURL(t)
		b, err := pgkv.Open(t.Context(), u, pgkv.Options{MaxConns: 16})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, kvtest.Options{Contenders: 8, ContendedUpdates: 40, LinearClients: 4, LinearOps: 50})

	u, _ := testenv.PostgresTLSSchemaURL(t)
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set("sslrootcert", testenv.StrangerCA(t))
	p.RawQuery = q.Encode()
	b, err := pgkv.Open(t.Context(), p.String(), pgkv.Options{})
	if err == nil {
		_ = b.Close()
		t.Fatal("opened with a CA that did not sign the server's certificate")
	}
	if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("refused with %v, want an unknown authority", err)
	}
}
