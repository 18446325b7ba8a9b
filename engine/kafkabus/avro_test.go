package kafkabus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/internal/testenv"
)

// TestPublishAvro: a publisher with a schema registry writes every event in
// the registry's wire format under the subject <topic>-value; logbook's
// own readers read it back exactly, and so do stock consumers that know
// only the registry: franz-go's sr client and serde, and Confluent's
// Python DeserializingConsumer with its AvroDeserializer.
func TestPublishAvro(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 3
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	reg, err := registry.Open(ctx, st, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tokens, err := auth.ParseEnv("viewer-token-1:viewer", nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	writeEvents(t, ctx, st, "s", 10, 2, 200)
	pc := testPublisher(cfg, topic, uniqueName(t, "tx"), partitions)
	pc.Schemas = reg
	p := NewPublisher(st, pc)
	stop := startPublisher(t, p)
	// The publisher registers its schema in the registry, whose events are
	// in the log too: the head is read once it has.
	waitFor(t, 20*time.Second, "the publisher to register its schema", func() bool {
		_, err := reg.Version(ctx, topic+"-value", registry.Latest, false)
		return err == nil
	})
	h := head(t, st)
	waitFor(t, 20*time.Second, "the publisher to reach the head", func() bool { return p.LastPosition() == h })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, st)
	checkTopic(t, cfg, topic, log, partitions)

	latest, err := reg.Version(ctx, topic+"-value", registry.Latest, false)
	if err != nil {
		t.Fatal(err)
	}

	// franz-go: the schema by the id in each record's header, from the
	// registry over HTTP; the value decoded with it.
	client, err := sr.NewClient(sr.URLs(srv.URL+"/registry"), sr.BasicAuth("consumer", "viewer-token-1"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var serde sr.Serde
	seen := 0
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for seen < len(log) {
		fs := cl.PollFetches(rctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", seen, err)
		}
		for _, r := range fs.Records() {
			id, _, err := serde.DecodeID(r.Value)
			if err != nil || id != latest.ID {
				t.Fatalf("record header: id %d (subject's %d), %v", id, latest.ID, err)
			}
			if !serde.IsRegistered(id) {
				s, err := client.SchemaByID(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				schema := avro.MustParse(s.Schema)
				serde.Register(id, map[string]any{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
			}
			var got map[string]any
			if err := serde.Decode(r.Value, &got); err != nil {
				t.Fatal(err)
			}
			pos := got["position"].(int64)
			want := log[pos-1]
			if got["stream"] != want.Stream || got["type"] != want.Type || string(got["data"].([]byte)) != string(want.Data) || string(r.Key) != want.Stream {
				t.Fatalf("position %d: %v, want %+v", pos, got, want)
			}
			seen++
		}
	}

	// Confluent's Python consumer.
	python := testenv.Python(t)
	out, err := exec.Command(python, "testdata/confluent_consumer.py", srv.URL+"/registry", "viewer-token-1",
		strings.Join(cfg.Brokers, ","), topic, strconv.Itoa(len(log))).Output()
	if err != nil {
		t.Fatalf("confluent_consumer.py: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	positions := map[uint64]bool{}
	for _, line := range lines {
		var r struct {
			Position uint64
			Stream   string
			Type     string
			Key      string
			Data     string
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		want := log[r.Position-1]
		if r.Stream != want.Stream || r.Key != want.Stream || r.Type != want.Type || r.Data != hex.EncodeToString(want.Data) {
			t.Fatalf("python read %+v, want %+v", r, want)
		}
		positions[r.Position] = true
	}
	if len(positions) != len(log) {
		t.Fatalf("python read %d distinct positions of %d", len(positions), len(log))
	}
}
