package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// A flights node publishes its log to a broker that takes only TLS and
// SCRAM, with its bus given as a URL that names the CA and the user, and
// the password in LOGBOOK_BUS_PASSWORD rather than in argv.
func TestServePublishesOverTLSAndSCRAM(t *testing.T) {
	b := testenv.KafkaTLS(t)
	pw, err := os.ReadFile(b.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(kafkabus.PasswordEnv, strings.TrimSpace(string(pw)))
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner")
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	topic := "logbook-tls-" + hex.EncodeToString(rb[:])
	bus := "kafka://" + b.SASLSSL + "/" + topic + "?" + url.Values{
		"tls_ca": {b.CA}, "sasl": {kafkabus.ScramSHA512}, "sasl_user": {b.User}}.Encode()
	cfg, _, err := kafkabus.ParseURL(bus)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	node := startFlightsNode(t, ctx, cancel, "--bus", bus)
	traffic(t, node)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	for {
		last, err := kafkabus.LastPublished(wctx, cfg, topic)
		if err == nil && last > 0 {
			t.Logf("published up to position %d over SASL_SSL", last)
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("nothing published over TLS: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A bus URL that would be less safe than it says is a usage error (exit
// 2) that names the problem.
func TestServeRefusesUnsafeBusURLs(t *testing.T) {
	for _, c := range []struct{ bus, want string }{
		{"kafka://127.0.0.1:1/t?sasl=PLAIN&sasl_user=u&sasl_password_file=/x", "needs tls=true"},
		{"kafka://127.0.0.1:1/t?tls=false&tls_ca=/x", "tls=false with tls_ca"},
		{"kafka://127.0.0.1:1/t?tls_ca=/no/such/ca.pem", "no such file"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &env{stdout: &out, stderr: &errb, getenv: os.Getenv},
			[]string{"flights", "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--bus", c.bus})
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("--bus %s: exit %d, %q; want 2 and a message saying %q", c.bus, code, errb.String(), c.want)
		}
	}
}
