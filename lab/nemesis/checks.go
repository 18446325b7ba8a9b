package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/lab/cluster"
	"github.com/logbook/logbook/services/flights"
)

// checkCluster checks, after the last heal, what holds whatever the
// workload: every replica's view equals a rebuild from the store within
// the bound; the publisher caught up with the store's head within the
// bound; the topic holds every position of the log exactly once.
func checkCluster(ctx context.Context, env *Env, within time.Duration, sum *Summary) []Violation {
	var out []Violation
	log, err := readLog(ctx, env.Store.URL)
	if err != nil {
		sum.ReplicasConverged = false
		return []Violation{{"store", "read the store: " + err.Error()}}
	}
	head := uint64(len(log))
	if head > 0 && log[len(log)-1].Position != head {
		out = append(out, Violation{"store", fmt.Sprintf("the log's last position is %d after %d events", log[len(log)-1].Position, head)})
	}
	rebuilt := flights.NewValidation()
	if err := rebuilt.Apply(ctx, log); err != nil {
		return append(out, Violation{"store", "rebuild the view: " + err.Error()})
	}
	want, _ := rebuilt.Digest()
	deadline := time.Now().Add(within)
	for _, n := range env.Cluster.Replicas {
		got, pos, err := awaitDigest(ctx, env, n, head, want, deadline)
		if err != nil || got != want {
			sum.ReplicasConverged = false
			out = append(out, Violation{"replicas-converged", fmt.Sprintf("%s: view %s at %d, the store's %s at %d, %v after the heal (%v)", n.Name, got, pos, want, head, within, err)})
		}
	}

	b, topic, err := kafkabus.ParseURL(env.Bus)
	if err != nil {
		return append(out, Violation{"kafka", err.Error()})
	}
	var last uint64
	for {
		last, err = kafkabus.LastPublished(ctx, b, topic)
		if err == nil && last >= head || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last < head {
		out = append(out, Violation{"publisher-resumed", fmt.Sprintf("the topic's last position is %d, the store's head %d, %v after the heal (%v)", last, head, within, err)})
	}
	recs, err := kafkabus.ReadTopic(ctx, b, topic)
	if err != nil {
		return append(out, Violation{"kafka", "read the topic: " + err.Error()})
	}
	seen := make(map[uint64]int, len(recs))
	for _, r := range recs {
		seen[r.Event.Position]++
		if p := r.Event.Position; p == 0 || p > head {
			out = append(out, Violation{"kafka", fmt.Sprintf("the topic holds position %d, beyond the log's %d", p, head)})
		} else if e := log[p-1]; e.ID != r.Event.ID {
			out = append(out, Violation{"kafka", fmt.Sprintf("position %d: the topic has event %s, the store %s", p, r.Event.ID, e.ID)})
		}
	}
	for p := uint64(1); p <= min(head, last); p++ {
		switch n := seen[p]; {
		case n == 0:
			sum.KafkaGaps++
		case n > 1:
			sum.KafkaDuplicates += n - 1
		}
	}
	if sum.KafkaGaps > 0 {
		out = append(out, Violation{"kafka-gaps", fmt.Sprintf("%d positions of the log up to %d are missing from the topic", sum.KafkaGaps, min(head, last))})
	}
	if sum.KafkaDuplicates > 0 {
		out = append(out, Violation{"kafka-duplicates", fmt.Sprintf("%d events are in the topic more than once", sum.KafkaDuplicates)})
	}
	return out
}

// awaitDigest asks n for its view's digest at head until it is want or
// the deadline passes; it returns the last answer.
func awaitDigest(ctx context.Context, env *Env, n *cluster.Node, head uint64, want string, deadline time.Time) (string, uint64, error) {
	var got string
	var pos uint64
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/validation/digest?min_position=%d", n.URL, head), nil)
		req.Header.Set("Authorization", "Bearer "+env.Token)
		res, err := env.Client.Do(req)
		if err == nil {
			var d struct {
				Digest   string `json:"digest"`
				Position uint64 `json:"position"`
			}
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			if res.StatusCode == http.StatusOK && json.Unmarshal(b, &d) == nil {
				got, pos, last = d.Digest, d.Position, nil
				if got == want {
					return got, pos, nil
				}
			} else {
				last = fmt.Errorf("%s: %s", res.Status, b)
			}
		} else {
			last = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return got, pos, last
		}
		time.Sleep(250 * time.Millisecond)
	}
}
