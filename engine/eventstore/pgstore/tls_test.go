package pgstore_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
)

// withParams returns u with the given query parameters set, and its host
// replaced when host is not empty.
func withParams(t *testing.T, u, host string, kv ...string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		p.Host = host + ":" + p.Port()
	}
	q := p.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	p.RawQuery = q.Encode()
	return p.String()
}

// Over sslmode=verify-full with the server's CA the store appends, reads
// and follows (the follow session is a connection of its own); the server
// takes TLS connections only, so these did not go in plaintext.
func TestStoreOverVerifiedTLS(t *testing.T) {
	u, _ := testenv.PostgresTLSSchemaURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, u, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub, err := s.Subscribe(ctx, eventstore.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := s.Append(ctx, "order-1", eventstore.NoStream, []eventstore.NewEvent{{Type: "OrderPlaced", Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	evs, err := sub.Next(ctx)
	if err != nil || len(evs) != 1 || evs[0].Stream != "order-1" {
		t.Fatalf("followed %v, %v; want the one event", evs, err)
	}
	got, err := s.ReadAll(ctx, 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("read %v, %v", got, err)
	}
}

// verify-full refuses a server whose certificate a CA other than the one
// given signed, or that is reached by a name its certificate does not
// carry; and the server refuses plaintext. Each refusal is checked beside
// a configuration that differs in that one thing and gets in, so a
// refusal cannot come from a server that is down.
func TestStoreTLSRefusals(t *testing.T) {
	good, _ := testenv.PostgresTLSSchemaURL(t)
	for _, c := range []struct {
		name, refused, admitted, want string
	}{
		{"wrong CA",
			withParams(t, good, "", "sslrootcert", testenv.StrangerCA(t)), good,
			"certificate signed by unknown authority"},
		{"wrong host name",
			withParams(t, good, "127.0.0.2"), withParams(t, good, "127.0.0.2", "sslmode", "verify-ca"),
			"certificate is valid for"},
		{"plaintext",
			withParams(t, good, "", "sslmode", "disable"), good,
			"no encryption"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			s, err := pgstore.Open(ctx, c.admitted, pgstore.Options{})
			if err != nil {
				t.Fatalf("the configuration that should get in: %v", err)
			}
			s.Close()
			s, err = pgstore.Open(ctx, c.refused, pgstore.Options{})
			if err == nil {
				s.Close()
				t.Fatal("the store connected")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with %v, want %q", err, c.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// verify-full refuses a server whose certificate has expired. No
// PostgreSQL will serve an expired certificate, so a listener of the
// test's plays the server's part up to the TLS handshake: it answers the
// client's SSLRequest with 'S' and shakes hands with the certificate the
// case gives. With a valid certificate of the same CA the handshake
// passes (the client then fails only on the missing server behind it).
func TestStoreRefusesAnExpiredServerCertificate(t *testing.T) {
	ca, err := devca.New("pgstore test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(notAfter time.Time) string { return testenv.PostgresCertStandIn(t, ca, caFile, notAfter) }
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = pgstore.Open(ctx, serve(time.Now().Add(-time.Hour)), pgstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired server certificate: %v, want it refused as expired", err)
	}
	t.Logf("refused: %v", err)
	_, err = pgstore.Open(ctx, serve(time.Now().Add(time.Hour)), pgstore.Options{})
	if err == nil || strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a valid server certificate of the same CA: %v, want the handshake to pass", err)
	}
}
