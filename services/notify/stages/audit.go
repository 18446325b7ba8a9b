package stages

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/logbook/logbook/engine/kafkabus"
)

// Audit is what the stage topics hold, read committed: each stage's
// output checked against its input, unit by unit. A unit is a chunk
// (request/chunk) for the requests and checked topics, a batch
// (request/chunk/channel/index) for the built and outcomes topics.
type Audit struct {
	Chunks   int `json:"chunks"`   // distinct chunks sent
	Checked  int `json:"checked"`  // distinct chunks checked
	Batches  int `json:"batches"`  // distinct batches built
	Outcomes int `json:"outcomes"` // distinct batches with an outcome
	// Duplicates are records of a unit the topic already held: output
	// written twice, what exactly-once rules out.
	Duplicates map[string]int `json:"duplicates"` // by topic
	// Missing: chunks sent but not checked; batches built without an
	// outcome.
	MissingChecked  int `json:"missing_checked"`
	MissingOutcomes int `json:"missing_outcomes"`
	// Planned is the messages the checked chunks call for (recipients ×
	// channels), Built those in the batches; they differ only if a user
	// lost an address between the check and the build.
	Planned int64 `json:"planned"`
	Built   int64 `json:"built"`
	// The outcomes' sums, every record counted (duplicates too).
	Refused   int64 `json:"refused"`
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Retries   int64 `json:"retries"`
}

// Exact reports whether the topics hold every unit once: no duplicate,
// nothing missing, every message planned built.
func (a Audit) Exact() bool {
	for _, n := range a.Duplicates {
		if n > 0 {
			return false
		}
	}
	return a.MissingChecked == 0 && a.MissingOutcomes == 0 && a.Planned == a.Built
}

// Problems lists what makes the audit inexact.
func (a Audit) Problems() []string {
	var out []string
	for _, topic := range []string{"requests", "checked", "built", "outcomes"} {
		if n := a.Duplicates[topic]; n > 0 {
			out = append(out, fmt.Sprintf("%d duplicate records in %s", n, topic))
		}
	}
	if a.MissingChecked > 0 {
		out = append(out, fmt.Sprintf("%d chunks sent but not checked", a.MissingChecked))
	}
	if a.MissingOutcomes > 0 {
		out = append(out, fmt.Sprintf("%d batches built without an outcome", a.MissingOutcomes))
	}
	if a.Planned != a.Built {
		out = append(out, fmt.Sprintf("%d messages planned by the check, %d built", a.Planned, a.Built))
	}
	return out
}

// Complete reports whether every chunk was checked, every message
// planned built and every batch has its outcome (the pipeline has
// drained; more than planned is built when batches were written twice).
func (a Audit) Complete() bool {
	return a.Chunks > 0 && a.MissingChecked == 0 && a.MissingOutcomes == 0 && a.Built >= a.Planned
}

// AuditTopics reads the four topics whole (they are held in memory: for
// tests and benchmarks) and audits them. Only the requests whose id
// starts with prefix count ("" all).
func AuditTopics(ctx context.Context, bus kafkabus.Config, t Topics, c *Codecs, prefix string) (Audit, error) {
	a := Audit{Duplicates: map[string]int{}}
	read := func(topic, name string, unit func(v []byte) (key string, ok bool, err error)) (map[string]int, error) {
		recs, err := kafkabus.ReadRecords(ctx, bus, topic)
		if err != nil {
			return nil, err
		}
		seen := map[string]int{}
		for _, r := range recs {
			k, ok, err := unit(r.Value)
			if err != nil {
				return nil, fmt.Errorf("stages: audit %s@%d/%d: %w", topic, r.Partition, r.Offset, err)
			}
			if !ok {
				continue
			}
			if seen[k]++; seen[k] > 1 {
				a.Duplicates[name]++
			}
		}
		return seen, nil
	}
	chunkKey := func(req string, chunk int32) string { return req + "/" + strconv.Itoa(int(chunk)) }
	batchKey := func(req string, chunk int32, ch string, i int32) string {
		return chunkKey(req, chunk) + "/" + ch + "/" + strconv.Itoa(int(i))
	}
	chunks, err := read(t.Requests, "requests", func(v []byte) (string, bool, error) {
		x, err := c.Chunk.Decode(v)
		return chunkKey(x.Request, x.Chunk), strings.HasPrefix(x.Request, prefix), err
	})
	if err != nil {
		return a, err
	}
	checked, err := read(t.Checked, "checked", func(v []byte) (string, bool, error) {
		x, err := c.Checked.Decode(v)
		if err != nil || !strings.HasPrefix(x.Request, prefix) {
			return "", false, err
		}
		for _, r := range x.Recipients {
			a.Planned += int64(len(r.Channels))
		}
		for _, n := range x.Refused {
			a.Refused += n
		}
		return chunkKey(x.Request, x.Chunk), true, nil
	})
	if err != nil {
		return a, err
	}
	batches, err := read(t.Built, "built", func(v []byte) (string, bool, error) {
		x, err := c.Batch.Decode(v)
		if err != nil || !strings.HasPrefix(x.Request, prefix) {
			return "", false, err
		}
		a.Built += int64(len(x.Messages))
		return batchKey(x.Request, x.Chunk, x.Channel, x.Index), true, nil
	})
	if err != nil {
		return a, err
	}
	outcomes, err := read(t.Outcomes, "outcomes", func(v []byte) (string, bool, error) {
		x, err := c.Outcome.Decode(v)
		if err != nil || !strings.HasPrefix(x.Request, prefix) {
			return "", false, err
		}
		a.Delivered += x.Delivered
		a.Failed += x.Failed
		a.Retries += x.Retries
		return batchKey(x.Request, x.Chunk, x.Channel, x.Index), true, nil
	})
	if err != nil {
		return a, err
	}
	a.Chunks, a.Checked, a.Batches, a.Outcomes = len(chunks), len(checked), len(batches), len(outcomes)
	for k := range chunks {
		if checked[k] == 0 {
			a.MissingChecked++
		}
	}
	for k := range batches {
		if outcomes[k] == 0 {
			a.MissingOutcomes++
		}
	}
	return a, nil
}
