package userscdc

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
)

// tlsEnv is newEnv on the TLS-only test server, reached with
// sslmode=verify-full; its URL has no search_path, the schema is the
// Config's.
func tlsEnv(t *testing.T) *env {
	t.Helper()
	u, schema := testenv.PostgresTLSSchemaURL(t)
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Del("search_path")
	p.RawQuery = q.Encode()
	return newEnvAt(t, p.String(), schema)
}

// The follower copies the snapshot and streams the changes over
// sslmode=verify-full: the replication connection, which pgconn opens
// apart from the pool, is a TLS one too (pg_stat_ssl of the slot's
// walsender says so, and the server takes no other).
func TestFollowOverVerifiedTLS(t *testing.T) {
	e := tlsEnv(t)
	e.write(t, func(w *Writer) error { return w.PutUser(user(1, "One"), 0) })
	v := openView(t, t.TempDir())
	e.start(t, v)
	lsn := e.write(t, func(w *Writer) error { return w.PutUser(user(2, "Two"), 0) })
	wait(t, v, lsn)
	e.same(t, v)
	var ssl bool
	var version string
	err := e.src.Pool.QueryRow(context.Background(), `SELECT s.ssl, s.version FROM pg_replication_slots r
		JOIN pg_stat_ssl s ON s.pid = r.active_pid WHERE r.slot_name = $1`, e.cfg.Slot).Scan(&ssl, &version)
	if err != nil {
		t.Fatalf("the slot's walsender: %v", err)
	}
	if !ssl {
		t.Fatal("the replication connection is not TLS")
	}
	t.Logf("replication connection: %s", version)
}

// A follower given a CA that did not sign the server's certificate, or a
// host name the certificate does not carry, does not start; nor does its
// replication connection alone get in, while with the right URL it does.
func TestFollowTLSRefusals(t *testing.T) {
	e := tlsEnv(t)
	wrongCA, err := url.Parse(e.cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := wrongCA.Query()
	q.Set("sslrootcert", testenv.StrangerCA(t))
	wrongCA.RawQuery = q.Encode()
	wrongHost, _ := url.Parse(e.cfg.URL)
	wrongHost.Host = "127.0.0.2:" + wrongHost.Port()
	plain, _ := url.Parse(e.cfg.URL)
	q = plain.Query()
	q.Set("sslmode", "disable")
	plain.RawQuery = q.Encode()
	for _, c := range []struct{ name, url, want string }{
		{"wrong CA", wrongCA.String(), "certificate signed by unknown authority"},
		{"wrong host name", wrongHost.String(), "certificate is valid for"},
		// The server takes TLS only: a follower that would go in
		// plaintext is turned away, its replication connection too.
		{"plaintext", plain.String(), "no encryption"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := e.cfg
			cfg.URL = c.url
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f, err := Start(ctx, openView(t, t.TempDir()), cfg)
			if err == nil {
				_ = f.Close()
				t.Fatal("the follower started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with %v, want %q", err, c.want)
			}
			t.Logf("refused: %v", err)
			_, err = (&Follower{cfg: cfg}).replicationConn(ctx)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the replication connection: %v, want a refusal saying %q", err, c.want)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&Follower{cfg: e.cfg}).replicationConn(ctx)
	if err != nil {
		t.Fatalf("the replication connection with the right URL: %v", err)
	}
	_ = conn.Close(ctx)
}

// verify-full refuses a users' database whose certificate has expired,
// for the follower and for its replication connection alone. No
// PostgreSQL will serve an expired certificate, so a listener of the
// test's plays the server's part up to the TLS handshake: it answers the
// client's SSLRequest with 'S' and shakes hands with the certificate the
// case gives. With a valid certificate of the same CA the handshake
// passes (the client then fails only on the missing server behind it).
func TestFollowRefusesAnExpiredServerCertificate(t *testing.T) {
	ca, err := devca.New("userscdc test CA")
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
	cfg := Config{URL: serve(time.Now().Add(-time.Hour)), Schema: "public", Slot: "expired_slot"}
	f, err := Start(ctx, openView(t, t.TempDir()), cfg)
	if err == nil {
		_ = f.Close()
		t.Fatal("the follower started")
	}
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("the follower of an expired server certificate: %v, want it refused as expired", err)
	}
	t.Logf("refused: %v", err)
	if _, err := (&Follower{cfg: cfg}).replicationConn(ctx); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("the replication connection to an expired server certificate: %v, want it refused as expired", err)
	}
	valid := Config{URL: serve(time.Now().Add(time.Hour)), Schema: "public", Slot: "expired_slot"}
	if _, err := (&Follower{cfg: valid}).replicationConn(ctx); err == nil || strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a valid server certificate of the same CA: %v, want the handshake to pass", err)
	}
}
