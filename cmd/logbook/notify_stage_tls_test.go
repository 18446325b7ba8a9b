package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/stages"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// stageTLSRig is what the stage processes reach over TLS: a Kafka
// listener that takes only SASL_SSL with SCRAM-SHA-512, a registry served
// over HTTPS that requires client certificates, and an HTTPS sink whose
// certificate a private CA signed.
type stageTLSRig struct {
	bus        string // the stage processes' --bus
	noTLSBus   string // bus with SCRAM but no TLS
	busCfg     kafkabus.Config
	topics     stages.Topics
	registry   string // https://…/registry
	tokenFile  string // --registry-token-file
	serverCA   string // signs the registry's certificate
	clientCert string // a client certificate the registry takes
	clientKey  string
	sinkCA     string // signs the sink's certificate
	sinkURL    string
	sink       *sink.Sink
}

const stageTLSToken = "stage-tls-admin"

func newStageTLSRig(t *testing.T) *stageTLSRig {
	b := testenv.KafkaTLS(t)
	pw, err := os.ReadFile(b.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	// The password from the environment, not argv.
	t.Setenv(kafkabus.PasswordEnv, strings.TrimSpace(string(pw)))
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	r := &stageTLSRig{topics: stages.TopicsOf("stage-tls-" + hex.EncodeToString(rb[:]))}
	r.bus = "kafka://" + b.SASLSSL + "/" + r.topics.Prefix + "?" + url.Values{
		"tls_ca": {b.CA}, "sasl": {kafkabus.ScramSHA512}, "sasl_user": {b.User}}.Encode()
	r.noTLSBus = "kafka://" + b.SASLSSL + "/" + r.topics.Prefix + "?" + url.Values{
		"sasl": {kafkabus.ScramSHA512}, "sasl_user": {b.User}}.Encode()
	if r.busCfg, _, err = kafkabus.ParseURL(r.bus); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := kafkabus.NewClient(r.busCfg)
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, r.topics.All()...)
	})
	dir := t.TempDir()
	serverCA, _ := devca.New("registry CA")
	clientCA, _ := devca.New("client CA")
	sinkCA, _ := devca.New("sink CA")
	regPair, _ := serverCA.Issue(devca.Leaf{Name: "registry", Hosts: []string{"127.0.0.1"}})
	sinkPair, _ := sinkCA.Issue(devca.Leaf{Name: "sink", Hosts: []string{"127.0.0.1"}})
	stagePair, _ := clientCA.Issue(devca.Leaf{Name: "stage"})
	if r.serverCA, err = serverCA.WriteCA(dir, "registry-ca"); err != nil {
		t.Fatal(err)
	}
	if r.sinkCA, err = sinkCA.WriteCA(dir, "sink-ca"); err != nil {
		t.Fatal(err)
	}
	if r.clientCert, r.clientKey, err = stagePair.Write(dir, "stage"); err != nil {
		t.Fatal(err)
	}
	r.tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(r.tokenFile, []byte(stageTLSToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// logbook's registry, served as a write node serves it, over HTTPS
	// with client certificates required.
	ctx := context.Background()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg, err := registry.Open(ctx, st, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	tokens, err := auth.ParseEnv(stageTLSToken+":schema-admin", registry.Roles())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	regCert, err := regPair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	regSrv := httptest.NewUnstartedServer(mux)
	regSrv.TLS = &tls.Config{Certificates: []tls.Certificate{regCert}, ClientCAs: clientCA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	regSrv.StartTLS()
	t.Cleanup(regSrv.Close)
	r.registry = regSrv.URL + "/registry"

	if r.sink, err = sink.New(sink.Options{}); err != nil {
		t.Fatal(err)
	}
	sinkCert, err := sinkPair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	sinkSrv := httptest.NewUnstartedServer(r.sink)
	sinkSrv.TLS = &tls.Config{Certificates: []tls.Certificate{sinkCert}, MinVersion: tls.VersionTLS12}
	sinkSrv.StartTLS()
	t.Cleanup(sinkSrv.Close)
	r.sinkURL = sinkSrv.URL + sink.Path
	return r
}

// args are a stage process's arguments toward the rig, with TLS to the
// registry.
func (r *stageTLSRig) args(stage string, extra ...string) []string {
	return append([]string{"notify", "stage", stage, "--bus", r.bus, "--registry", r.registry,
		"--registry-token-file", r.tokenFile, "--registry-ca", r.serverCA, "--registry-cert", r.clientCert, "--registry-key", r.clientKey,
		"--instance", stage + "-tls", "--partitions", "2", "--max-batch", "5", "--log-format", "json"}, extra...)
}

// The three notify stages run as `logbook notify stage` processes over a
// SASL_SSL (SCRAM-SHA-512) bus, registering their schemas at a registry
// that takes HTTPS with client certificates only, and deliver to an HTTPS
// sink with a private CA: a request sent by a Sender over the same bus
// reaches the sink, every message once.
func TestNotifyStagesOverTLS(t *testing.T) {
	r := newStageTLSRig(t)
	usersURL, schema := testenv.URL(t), testenv.Schema(t)
	ctx := context.Background()
	src, err := userscdc.OpenSource(ctx, usersURL, schema)
	if err != nil {
		t.Fatal(err)
	}
	const users, notifyType = 300, "like_update"
	if err := src.Generate(ctx, userscdc.Population{Users: users, Type: notifyType, Refuse: 0.1, OptOut: 0.02, NoEmail: 0.1, NoPush: 0.2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	all, err := src.Users(ctx)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	var expected int64
	ids := make([]int64, users)
	for i := range ids {
		ids[i] = int64(i + 1)
		expected += int64(len(pipeline.DefaultPolicy.Check(all[ids[i]], notifyType).Channels))
	}
	t.Setenv("LOGBOOK_USERS_DB", usersURL)

	sctx, stop := context.WithCancel(ctx)
	type exit struct {
		stage  string
		code   int
		stderr *syncBuffer
	}
	exits := make(chan exit, 3)
	for _, stage := range stages.Names {
		extra := []string{"--users-schema", schema}
		if stage == stages.Deliver {
			extra = []string{"--push-url", r.sinkURL, "--email-url", r.sinkURL, "--deliver-ca", r.sinkCA}
		}
		stderr := &syncBuffer{}
		go func() {
			code := run(sctx, &env{stdout: &syncBuffer{}, stderr: stderr, getenv: os.Getenv}, r.args(stage, extra...))
			exits <- exit{stage, code, stderr}
		}()
	}
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		for range stages.Names {
			e := <-exits
			if e.code != 0 {
				t.Errorf("notify stage %s exited %d: %s", e.stage, e.code, e.stderr.String())
			}
		}
	}
	defer stopAll()

	// The Sender, over the same bus, with the registry's client TLS.
	tc, err := server.ClientTLS(r.serverCA, r.clientCert, r.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := registry.NewClientTLS(r.registry, stageTLSToken, tc)
	if err != nil {
		t.Fatal(err)
	}
	if err := stages.EnsureTopics(ctx, r.busCfg, r.topics, 2); err != nil {
		t.Fatal(err)
	}
	snd, err := stages.NewSender(ctx, r.busCfg, schemas, r.topics, "tls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	req := &notify.Request{ID: "req-tls", Type: notifyType, ClubID: 1, Sender: "test", Timestamp: time.Now(), ToUsers: ids}
	if _, err := snd.Send(ctx, req, 40); err != nil {
		t.Fatalf("sending over SASL_SSL: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	var st sink.Stats
	go func() { st, err = r.sink.WaitUnique(wctx, expected); close(done) }()
	select {
	case <-done:
	case e := <-exits:
		exits <- e
		t.Fatalf("notify stage %s exited %d before the sink had every message: %s", e.stage, e.code, e.stderr.String())
	}
	if err != nil {
		t.Fatalf("the HTTPS sink took %d of %d messages: %v", st.UniqueKeys, expected, err)
	}
	stopAll()
	t.Logf("%d messages delivered over SASL_SSL, an mTLS registry and an HTTPS sink", st.UniqueKeys)
}

// Without the client certificate the registry demands, or without the CA
// that signs its certificate, a stage process cannot register its
// schemas and exits with an error saying so; TLS flags toward a plain
// http:// registry are bad usage.
func TestNotifyStageTLSRefusals(t *testing.T) {
	r := newStageTLSRig(t)
	deliver := []string{"--push-url", r.sinkURL, "--email-url", r.sinkURL, "--deliver-ca", r.sinkCA}
	noCert := []string{"notify", "stage", "deliver", "--bus", r.bus, "--registry", r.registry, "--registry-token-file", r.tokenFile,
		"--registry-ca", r.serverCA, "--instance", "refused"}
	noCA := []string{"notify", "stage", "deliver", "--bus", r.bus, "--registry", r.registry, "--registry-token-file", r.tokenFile,
		"--registry-cert", r.clientCert, "--registry-key", r.clientKey, "--instance", "refused"}
	plain := []string{"notify", "stage", "deliver", "--bus", r.bus, "--registry", "http://127.0.0.1:1/registry",
		"--registry-ca", r.serverCA, "--instance", "refused"}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no client certificate", append(noCert, deliver...), 1, "certificate"},
		{"registry CA not given", append(noCA, deliver...), 1, "certificate signed by unknown authority"},
		{"TLS flags for http://", append(plain, deliver...), 2, "are for an https:// --registry"},
		{"deliver TLS flags for preference", append(r.args("preference"), "--users-db", "postgres://x/y", "--deliver-ca", r.sinkCA), 2, "are for the deliver stage"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var out, errb syncBuffer
		code := run(ctx, &env{stdout: &out, stderr: &errb, getenv: os.Getenv}, c.args)
		cancel()
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want %d and a message saying %q", c.name, code, errb.String(), c.code, c.want)
		} else {
			t.Logf("%s: exit %d: %s", c.name, code, strings.TrimSpace(errb.String()))
		}
	}

	// The bus with a wrong SCRAM password, and with SCRAM but no TLS: the
	// process cannot create or reach its topics.
	for _, c := range []struct{ name, bus, password, want string }{
		{"wrong SCRAM password", r.bus, "not-the-password", "SASL_AUTHENTICATION_FAILED"},
		{"SCRAM without TLS", r.noTLSBus, os.Getenv(kafkabus.PasswordEnv), "tls endpoint"},
	} {
		t.Setenv(kafkabus.PasswordEnv, c.password)
		args := append([]string{"notify", "stage", "deliver", "--bus", c.bus, "--registry", r.registry, "--registry-token-file", r.tokenFile,
			"--registry-ca", r.serverCA, "--registry-cert", r.clientCert, "--registry-key", r.clientKey, "--instance", "refused"}, deliver...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var out, errb syncBuffer
		code := run(ctx, &env{stdout: &out, stderr: &errb, getenv: os.Getenv}, args)
		cancel()
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want a failure saying %q", c.name, code, errb.String(), c.want)
		} else {
			t.Logf("%s: exit %d: %s", c.name, code, strings.TrimSpace(errb.String()))
		}
	}
}
