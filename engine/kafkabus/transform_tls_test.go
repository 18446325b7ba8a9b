package kafkabus

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/internal/testenv"
)

// upper is a TransformFunc that writes each record's value in upper case
// to out.
func upper(out string) TransformFunc {
	return func(_ context.Context, in []*kgo.Record, emit func(*kgo.Record)) error {
		for _, r := range in {
			emit(&kgo.Record{Topic: out, Key: r.Key, Value: bytes.ToUpper(r.Value)})
		}
		return nil
	}
}

// runTransformer runs a Transformer of in into out with cfg for at most
// d, or until it has taken want records; it returns its stats and what
// Run returned.
func runTransformer(t *testing.T, cfg Config, in, out string, want uint64, d time.Duration) (TransformerStats, error) {
	t.Helper()
	tr, err := NewTransformer(cfg, TransformerConfig{Topic: in, Group: uniqueName(t, "g"), TransactionalID: uniqueName(t, "tx"), MaxBatch: 7}, upper(out))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	for {
		select {
		case err := <-done:
			return tr.Stats(), err
		case <-time.After(50 * time.Millisecond):
		}
		if want > 0 && tr.Stats().In >= want {
			cancel()
			return tr.Stats(), <-done
		}
	}
}

// A stage process (Transformer) reads, transforms and writes over a
// SASL_SSL listener with SCRAM-SHA-512, exactly once; the same process
// with a wrong password, or with SCRAM but no TLS, transforms nothing.
// The right configuration runs first, so a refusal cannot come from a
// broker that is down.
func TestTLSTransformer(t *testing.T) {
	b := testenv.KafkaTLS(t)
	saslURL := func(params url.Values) string {
		params.Set("sasl", ScramSHA512)
		params.Set("sasl_user", b.User)
		return tlsBusURL(b.SASLSSL, params)
	}
	cfg := mustParse(t, saslURL(url.Values{"tls_ca": {b.CA}, "sasl_password_file": {b.PasswordFile}}))
	in, out := newTopic(t, cfg, 2), newTopic(t, cfg, 2)

	const n = 50
	cl, err := cfg.client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte("event-" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing the input over SASL_SSL: %v", err)
	}

	st, err := runTransformer(t, cfg, in, out, n, 60*time.Second)
	if err != nil || st.In != n || st.Out != n || st.Acked != n {
		t.Fatalf("over SASL_SSL: stats %+v, Run %v; want %d records in, out and acknowledged", st, err, n)
	}
	// The output, read committed: every input once, transformed.
	rd, err := cfg.client(kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	got := map[string]int{}
	for len(got) < n && rctx.Err() == nil {
		fs := rd.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)+"="+string(r.Value)]++ })
	}
	if len(got) != n {
		t.Errorf("output holds %d distinct records, want %d", len(got), n)
	}
	for i := range n {
		if k := strconv.Itoa(i) + "=EVENT-" + strconv.Itoa(i); got[k] != 1 {
			t.Errorf("output %s: %d times, want once", k, got[k])
			break
		}
	}

	wrongPW := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongPW, []byte("not-the-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, url, want string }{
		{"wrong SCRAM password", saslURL(url.Values{"tls_ca": {b.CA}, "sasl_password_file": {wrongPW}}), "SASL_AUTHENTICATION_FAILED"},
		{"SCRAM without TLS", saslURL(url.Values{"sasl_password_file": {b.PasswordFile}}), "tls endpoint"},
	} {
		st, err := runTransformer(t, mustParse(t, c.url), in, out, 0, 8*time.Second)
		if st.In != 0 || st.Out != 0 || st.Committed != 0 {
			t.Errorf("%s: the transformer got in: %+v", c.name, st)
		}
		// The reason shows where the client reports it: from Run, or
		// from a plain client with the same configuration.
		if err == nil {
			err = reach(mustParse(t, c.url))
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: refused with %v, want %q", c.name, err, c.want)
		} else {
			t.Logf("%s: refused: %v", c.name, err)
		}
	}
}
