package kafkabus

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
)

func TestParseURLSecurity(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := testenv.StrangerCA(t)
	for _, c := range []struct {
		url  string
		want Security
	}{
		{"kafka://h:1/t", Security{}},
		{"kafka://h:1/t?tls=true", Security{TLS: true}},
		{"kafka://h:1/t?tls_ca=" + ca, Security{TLS: true, CAFile: ca}},
		{"kafka://h:1/t?tls_server_name=kafka.internal", Security{TLS: true, ServerName: "kafka.internal"}},
		{"kafka://h:1/t?tls=1&sasl=scram-sha-512&sasl_user=alice&sasl_password_file=" + pw,
			Security{TLS: true, SASL: ScramSHA512, User: "alice", PasswordFile: pw}},
		{"kafka://alice@h:1,h:2/t?sasl=SCRAM-SHA-256&sasl_password_file=" + pw,
			Security{SASL: ScramSHA256, User: "alice", PasswordFile: pw}},
		{"kafka://h:1/t?tls=true&sasl=PLAIN&sasl_user=alice&sasl_password_file=" + pw,
			Security{TLS: true, SASL: Plain, User: "alice", PasswordFile: pw}},
	} {
		cfg, topic, err := ParseURL(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if topic != "t" || cfg.Security != c.want {
			t.Errorf("%s: topic %q, security %+v; want t, %+v", c.url, topic, cfg.Security, c.want)
		}
	}

	t.Setenv(PasswordEnv, "from-env")
	cfg, _, err := ParseURL("kafka://h:1/t?tls=true&sasl=SCRAM-SHA-512&sasl_user=alice")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := cfg.Security.password(); p != "from-env" || err != nil {
		t.Errorf("password from %s = %q, %v", PasswordEnv, p, err)
	}
}

// A bus URL that would leave the bus less safe than it says, or put a
// password where ps and logs show it, is refused; and no error quotes a
// password.
func TestParseURLRefusals(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	for _, c := range []struct{ url, want string }{
		{"kafka://alice:hunter2@h:1/t?sasl=SCRAM-SHA-512", "password in the URL"},
		{"kafka://h:1/t?sasl=SCRAM-SHA-512&sasl_user=a&sasl_password=hunter2", "password in the URL"},
		{"kafka://h:1/t?sasl=PLAIN&sasl_user=a&sasl_password_file=/x", "needs tls=true"},
		{"kafka://h:1/t?sasl=GSSAPI&sasl_user=a", "want SCRAM-SHA-512"},
		{"kafka://h:1/t?sasl=SCRAM-SHA-512", "needs a user"},
		{"kafka://h:1/t?sasl_user=a", "without sasl="},
		{"kafka://h:1/t?tls=false&tls_ca=/x", "tls=false with tls_ca"},
		{"kafka://h:1/t?tls_cert=/x", "go together"},
		{"kafka://h:1/t?tls=yes please", "want true or false"},
		{"kafka://h:1/t?tsl=true", "unknown parameter tsl"},
		{"kafka://h:1/t?tls_ca=%zz", "not key=value pairs"},
		{"kafka://h:1/t?tls_ca=/no/such/ca.pem", "no such file"},
		{"kafka://h:1/t?sasl=SCRAM-SHA-512&sasl_user=a", "LOGBOOK_BUS_PASSWORD"},
		{"kafka://h:1/t?sasl=SCRAM-SHA-512&sasl_user=a&sasl_password_file=/no/such", "no such file"},
	} {
		_, _, err := ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.url, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error quotes the password: %v", c.url, err)
		}
	}
}

// The password is read at every authentication: a rotated file is used by
// the next connection without a restart.
func TestPasswordReadAtEachAuthentication(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Security{SASL: ScramSHA512, User: "a", PasswordFile: pw}
	if a, err := s.scramAuth(context.Background()); err != nil || a.Pass != "first" || a.User != "a" {
		t.Fatalf("auth = %+v, %v", a, err)
	}
	if err := os.WriteFile(pw, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, err := s.scramAuth(context.Background()); err != nil || a.Pass != "second" {
		t.Fatalf("after rotation auth = %+v, %v", a, err)
	}
}

// tlsBusURL is the bus URL of the TLS test broker's listener addr with
// the given parameters.
func tlsBusURL(addr string, params url.Values) string {
	return "kafka://" + addr + "/t?" + params.Encode()
}

// reach asks the brokers for the topics, with a deadline: the error says
// whether a client with cfg gets in at all.
func reach(cfg Config) error {
	cl, err := cfg.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	return err
}

func mustParse(t *testing.T, u string) Config {
	t.Helper()
	cfg, _, err := ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// With the right CA and credentials the publisher, a replica, a processor
// and a reader of the topic all work over TLS: by client certificate on the SSL
// listener, and by SCRAM-SHA-512 on the SASL_SSL one.
func TestTLSBusPublishesAndConsumes(t *testing.T) {
	b := testenv.KafkaTLS(t)
	for name, u := range map[string]string{
		"client certificate": tlsBusURL(b.SSL, url.Values{"tls_ca": {b.CA}, "tls_cert": {b.Cert}, "tls_key": {b.Key}}),
		"SCRAM-SHA-512":      tlsBusURL(b.SASLSSL, url.Values{"tls_ca": {b.CA}, "sasl": {ScramSHA512}, "sasl_user": {b.User}, "sasl_password_file": {b.PasswordFile}}),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := mustParse(t, u)
			const partitions = 3
			topic := newTopic(t, cfg, partitions)
			st := openStore(t, t.TempDir())
			ctx := context.Background()
			p := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
			startPublisher(t, p)
			live := &countingStore{Store: st}
			view, runner := runView(t, NewReplicaStore(cfg, topic, live, WithCatchUpWindow(-1), WithGapWait(time.Minute)), "replica")
			writeEvents(t, ctx, st, "s", 10, 2, 200)
			waitFor(t, 30*time.Second, "the publisher to reach the head", func() bool { return p.LastPosition() == head(t, st) })
			log := readLog(t, st)
			checkTopic(t, cfg, topic, log, partitions)
			checkView(t, st, view, runner, "replica")
			if n := live.read.Load(); n != 0 {
				t.Errorf("the replica read %d events from the fallback, want all from Kafka", n)
			}
			m := startMember(t, cfg, uniqueName(t, "g"), topic, st)
			checkHandled(t, log, m)
		})
	}
	// The other mechanisms the broker offers: the client gets in.
	for _, mech := range []string{ScramSHA256, Plain} {
		cfg := mustParse(t, tlsBusURL(b.SASLSSL, url.Values{"tls_ca": {b.CA}, "sasl": {mech}, "sasl_user": {b.User}, "sasl_password_file": {b.PasswordFile}}))
		if err := reach(cfg); err != nil {
			t.Errorf("%s: %v", mech, err)
		}
	}
}

// Each way in that must be shut is: a CA that did not sign the broker's
// certificate, a name the certificate does not carry, a wrong SCRAM
// password, no client certificate where one is required, and plaintext
// against a TLS listener. Each case is checked beside the right
// configuration, so a refusal cannot come from a broker that is down.
func TestTLSBusRefusals(t *testing.T) {
	b := testenv.KafkaTLS(t)
	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := func(ca, pwFile string) url.Values {
		return url.Values{"tls_ca": {ca}, "sasl": {ScramSHA512}, "sasl_user": {b.User}, "sasl_password_file": {pwFile}}
	}
	right := mustParse(t, tlsBusURL(b.SASLSSL, sasl(b.CA, b.PasswordFile)))
	if err := reach(right); err != nil {
		t.Fatalf("the right configuration: %v", err)
	}
	withName := sasl(b.CA, b.PasswordFile)
	withName.Set("tls_server_name", "kafka.elsewhere.example")
	// A client certificate the broker's own CA signed, but expired, and
	// beside it one that CA signed and is valid: only the first is
	// refused.
	ca, err := devca.Load(b.CA, filepath.Join(filepath.Dir(b.CA), "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	clientCert := func(name string, notAfter time.Time) url.Values {
		p, err := ca.Issue(devca.Leaf{Name: name, NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := p.Write(t.TempDir(), name)
		if err != nil {
			t.Fatal(err)
		}
		return url.Values{"tls_ca": {b.CA}, "tls_cert": {cert}, "tls_key": {key}}
	}
	if err := reach(mustParse(t, tlsBusURL(b.SSL, clientCert("fresh", time.Now().Add(time.Hour))))); err != nil {
		t.Fatalf("a valid client certificate of the broker's CA: %v", err)
	}
	for _, c := range []struct {
		name, url, want string
	}{
		{"wrong CA", tlsBusURL(b.SASLSSL, sasl(testenv.StrangerCA(t), b.PasswordFile)), "certificate signed by unknown authority"},
		{"wrong server name", tlsBusURL(b.SASLSSL, withName), "certificate is valid for"},
		{"wrong SCRAM password", tlsBusURL(b.SASLSSL, sasl(b.CA, wrongPW)), "SASL_AUTHENTICATION_FAILED"},
		{"no client certificate", tlsBusURL(b.SSL, url.Values{"tls_ca": {b.CA}}), "bad certificate"},
		{"expired client certificate", tlsBusURL(b.SSL, clientCert("expired", time.Now().Add(-time.Hour))), "certificate"},
		{"plaintext to the SSL listener", "kafka://" + b.SSL + "/t", "tls endpoint"},
		{"plaintext SCRAM to the SASL_SSL listener", tlsBusURL(b.SASLSSL, url.Values{"sasl": {ScramSHA512}, "sasl_user": {b.User}, "sasl_password_file": {b.PasswordFile}}), "tls endpoint"},
	} {
		err := reach(mustParse(t, c.url))
		switch {
		case err == nil:
			t.Errorf("%s: the broker let the client in", c.name)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: refused with %v, want %q", c.name, err, c.want)
		default:
			t.Logf("%s: refused: %v", c.name, err)
		}
	}
}
