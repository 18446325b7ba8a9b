package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/flights"
)

const tokens = "planner-token planner\nviewer-token viewer\n"

// buildBinary builds the logbook command for the nodes.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "logbook")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/logbook/logbook/cmd/logbook")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestClusterSurvivesKills runs 3 write nodes, 2 read replicas and nginx
// on loopback. Planners send commands through nginx while one write node
// and one replica are killed with SIGKILL and restarted. Afterwards every
// acknowledged command is in the store, once, and every view — each
// replica's and each write node's — equals a rebuild from the store. The
// bus carries the log in Avro (--bus-format avro): the replicas read it
// back, and its schema is in the registry under <topic>-value.
func TestClusterSurvivesKills(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	nginx := testenv.Nginx(t)
	bus := kafkaBus(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Binary: bin, Store: url, Bus: bus, Writers: 3, Replicas: 2, Dir: dir, Tokens: tokens, Nginx: nginx,
		ExtraArgs: []string{"--bus-format", "avro"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes() {
				t.Logf("%s log:\n%s", n.Name, tail(n.Log(), 3000))
			}
		}
	}()

	// The workload: planners each build their own rotations leg by leg,
	// retrying a command with its Idempotency-Key until it is answered.
	const planners = 12
	var acked sync.Map // "rotation/leg" -> true
	var commands, retries atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	errs := make(chan error, planners)
	for p := range planners {
		wg.Go(func() {
			for r := 0; ; r++ {
				rot := fmt.Sprintf("p%d-r%d", p, r)
				if err := command(ctx, client, c.URL, "POST", "/api/rotations", "create-"+rot, map[string]string{"id": rot}, &retries); err != nil {
					errs <- err
					return
				}
				commands.Add(1)
				for k := range 8 {
					select {
					case <-stop:
						return
					default:
					}
					dep := base.Add(time.Duration(k) * 3 * time.Hour)
					from, to := "AMS", "LHR"
					if k%2 == 1 {
						from, to = to, from
					}
					leg := flights.Leg{ID: fmt.Sprintf("l%d", k), Airline: "LB", Number: 1 + (p*800+r*8+k)%9999, Origin: from, Destination: to,
						DayOfOrigin: dep.Format(time.DateOnly), Departure: dep, Arrival: dep.Add(2 * time.Hour)}
					if err := command(ctx, client, c.URL, "POST", "/api/rotations/"+rot+"/legs", "leg-"+rot+"-"+leg.ID, leg, &retries); err != nil {
						errs <- err
						return
					}
					commands.Add(1)
					acked.Store(rot+"/"+leg.ID, true)
				}
			}
		})
	}

	time.Sleep(2 * time.Second)
	victimW, victimR := c.Writers[1], c.Replicas[0]
	victimW.Kill()
	victimR.Kill()
	t.Logf("killed %s and %s after %d commands", victimW.Name, victimR.Name, commands.Load())
	time.Sleep(2 * time.Second)
	if err := victimW.Restart(bin); err != nil {
		t.Fatal(err)
	}
	if err := victimR.Restart(bin); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Node{victimW, victimR} {
		if err := n.WaitReady(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("restarted them after %d commands", commands.Load())
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d commands acknowledged, %d retried", commands.Load(), retries.Load())
	if commands.Load() < 100 {
		t.Fatalf("only %d commands went through", commands.Load())
	}

	store, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	log := readAll(t, store)
	if uint64(len(log)) != head {
		t.Fatalf("read %d events, head %d", len(log), head)
	}

	// Every acknowledged leg is in the log, and no command was applied
	// twice: each leg once, each idempotency key once.
	legs := make(map[string]int)
	keys := make(map[string]int)
	for _, ev := range log {
		if k := ev.Meta["idempotency-key"]; k != "" {
			keys[ev.Stream+" "+k]++
		}
		if ev.Type != "LegsAdded" {
			continue
		}
		var added flights.LegsAdded
		if err := json.Unmarshal(ev.Data, &added); err != nil {
			t.Fatal(err)
		}
		for _, l := range added.Legs {
			legs[strings.TrimPrefix(ev.Stream, "rotation-")+"/"+l.ID]++
		}
	}
	missing := 0
	acked.Range(func(k, _ any) bool {
		if legs[k.(string)] == 0 {
			missing++
			t.Errorf("acknowledged leg %s is not in the log", k)
		}
		return missing < 10
	})
	for l, n := range legs {
		if n > 1 {
			t.Errorf("leg %s added %d times", l, n)
		}
	}
	for k, n := range keys {
		if n > 1 {
			t.Errorf("idempotency key %s applied %d times", k, n)
		}
	}

	// Every view equals a rebuild from the store at the head.
	rebuilt := flights.NewValidation()
	if err := rebuilt.Apply(ctx, log); err != nil {
		t.Fatal(err)
	}
	want, wantPos := rebuilt.Digest()
	views := 0
	for _, n := range c.Nodes() {
		if n.CommandsOnly {
			continue
		}
		views++
		got, pos := viewDigest(ctx, t, n, head)
		if got != want || pos != wantPos {
			t.Errorf("%s: view %s at %d, rebuild from the store %s at %d", n.Name, got, pos, want, wantPos)
		}
	}
	if views != 2 {
		t.Errorf("%d views compared, want the 2 replicas'", views)
	}
	checkBus(ctx, t, bus, log)
	checkBusSchema(ctx, t, c.Writers[0], bus)
}

// checkBusSchema checks that the bus's value schema is registered under
// <topic>-value in the registry n serves, which a stock Confluent
// deserializer asks for by the id in each value.
func checkBusSchema(ctx context.Context, t *testing.T, n *Node, bus string) {
	t.Helper()
	_, topic, err := kafkabus.ParseURL(bus)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Addr+"/registry/subjects/"+topic+"-value/versions/latest", nil)
	req.Header.Set("Authorization", "Bearer viewer-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v struct {
		Schema string `json:"schema"`
		ID     int    `json:"id"`
	}
	if err := json.Unmarshal(b, &v); res.StatusCode != http.StatusOK || err != nil || v.ID <= 0 || !strings.Contains(v.Schema, `"logbook.Event"`) {
		t.Fatalf("the bus's schema under %s-value: %s %s", topic, res.Status, b)
	}
}

// command sends one command, retrying on failures that leave its outcome
// unknown, with the same Idempotency-Key: nginx passes over a dead node,
// but a request in flight when the node died fails.
func command(ctx context.Context, client *http.Client, base, method, path, key string, body any, retries *atomic.Int64) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			retries.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: gave up: %w", method, path, ctx.Err())
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(payload))
		req.Header.Set("Authorization", "Bearer planner-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated:
			return nil
		case res.StatusCode >= 500:
			continue
		default:
			return fmt.Errorf("%s %s: %s: %s", method, path, res.Status, b)
		}
	}
}

func readAll(t *testing.T, s eventstore.Store) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for from := uint64(1); ; {
		evs, err := s.ReadAll(t.Context(), from, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Position + 1
	}
}

func viewDigest(ctx context.Context, t *testing.T, n *Node, head uint64) (string, uint64) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/api/validation/digest?min_position=%d", n.Addr, head), nil)
	req.Header.Set("Authorization", "Bearer viewer-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	defer res.Body.Close()
	var d struct {
		Digest   string `json:"digest"`
		Position uint64 `json:"position"`
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s: digest: %s: %s", n.Name, res.Status, b)
	}
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.Digest, d.Position
}
