package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReproductionsUpToDate: docs/reproductions.md is exactly what the
// index and the recorded runs render to. LOGBOOK_REPRO_UPDATE=1 rewrites it.
func TestReproductionsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	got, charts, err := Build(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, DocPath)
	if os.Getenv("LOGBOOK_REPRO_UPDATE") == "1" {
		if err := WriteCharts(root, charts); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for rel, b := range charts {
		if old, err := os.ReadFile(filepath.Join(root, rel)); err != nil || !bytes.Equal(old, b) {
			t.Errorf("%s is missing or differs from what its recorded run draws (%v): regenerate it with LOGBOOK_REPRO_UPDATE=1 go test ./lab/repro -run TestReproductionsUpToDate", rel, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, ChartDir, "*.svg"))
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		if _, ok := charts[rel]; !ok {
			t.Errorf("%s is no entry's chart: regenerate with LOGBOOK_REPRO_UPDATE=1 go test ./lab/repro -run TestReproductionsUpToDate", rel)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (LOGBOOK_REPRO_UPDATE=1 go test ./lab/repro -run TestReproductionsUpToDate writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what %s and %s render to: regenerate it with LOGBOOK_REPRO_UPDATE=1 go test ./lab/repro -run TestReproductionsUpToDate", DocPath, IndexPath, ResultsDir)
	}
}

// Every recorded result belongs to an entry with a template, and every
// entry's template renders its result: checked by Build above; here, that
// the committed index has the rows the brief of the page promises.
func TestIndexCoversTheWorks(t *testing.T) {
	idx, err := LoadIndex(filepath.Join("..", "..", IndexPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range []string{"Table 6.1", "Table 6.2", "Table 6.3", "Table 1", "Table 7", "Table 9", "Table 11", "Table 13", "Figure 6", "Figure 7", "Figure 5.1", "Figure 5.2", "Figure 6.1"} {
		found := false
		for _, e := range idx.Entries {
			found = found || e.Item == item
		}
		if !found {
			t.Errorf("no entry for %s", item)
		}
	}
}

func testIndex(template string) *Index {
	return &Index{
		Works: []Work{{Key: "w", Title: "A Work", Authors: "Ann Author", Year: 2000, Kind: "paper"}},
		Entries: []Entry{{
			ID: "w-t1", Work: "w", Item: "Table 1", Measures: "throughput",
			Commands: []string{"logbook pepa sweep m.pepa -o json"},
			Authors:  Values{Columns: []string{"a", "x"}, Rows: [][]string{{"1", "0.5"}}},
			Ours:     template, Differs: "nothing", Status: Reproduced,
		}},
	}
}

func testResult(output string) map[string]*Result {
	return map[string]*Result{"w-t1": {
		ID: "w-t1", RecordedAt: "2026-11-27T05:00:00Z", Commit: "abc1234", CPUs: 2,
		Load: Load{Before: 1, Max: 3, After: 2},
		Runs: []Run{{Command: "logbook pepa sweep m.pepa -o json", Output: json.RawMessage(output)}},
	}}
}

func TestRenderFillsOursFromTheOutput(t *testing.T) {
	idx := testIndex(`{{range .Out.rows}}| {{f0 .a}} | {{f4 .x}} |{{end}}`)
	if err := idx.check(); err != nil {
		t.Fatal(err)
	}
	b, err := Render(idx, testResult(`{"rows":[{"a":1,"x":0.49996}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"| 1 | 0.5000 |", "load average 1.00 before, 3.00 at most", "commit abc1234", "loaded beyond its cores", "| 1 | 0.5 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, s)
		}
	}
}

// A template naming a field the output lacks fails the render: no blank
// cell, no "<no value>".
func TestMissingFieldFailsLoudly(t *testing.T) {
	for _, tmpl := range []string{
		`{{.Out.nope}}`,
		`{{range .Out.rows}}{{f2 .y}}{{end}}`,
		`{{f2 (get .Out "rows.0.y")}}`,
		`{{f2 (get .Out "rows.3.x")}}`,
		`{{range .Out.rows}}{{.y}}{{end}}`,
		`{{cell .Authors 5 0}}`,
		`{{index .Out "nope"}}`, // index does not honour missingkey: caught by the "<no value>" check
	} {
		_, err := Render(testIndex(tmpl), testResult(`{"rows":[{"a":1,"x":0.5}]}`))
		if err == nil {
			t.Errorf("%s: rendered without an error", tmpl)
		}
	}
	// A JSON null is missing too.
	if _, err := Render(testIndex(`{{f2 (get .Out "x")}}`), testResult(`{"x":null}`)); err == nil {
		t.Error("null rendered as a number")
	}
}

// An entry with no recorded run says so with its command, and shows no
// number of ours.
func TestNotRecordedSaysSo(t *testing.T) {
	b, err := Render(testIndex(`{{f4 (get .Out "x")}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "not recorded yet: `"+RecordCommand+" w-t1`") {
		t.Errorf("no 'not recorded yet' with the command:\n%s", s)
	}
	if strings.Contains(s, "recorded 20") {
		t.Errorf("a result is shown for an entry never recorded:\n%s", s)
	}
}

// A result recorded for a command the index no longer has is refused:
// the page never shows numbers of another command under this one.
func TestStaleResultRefused(t *testing.T) {
	dir := t.TempDir()
	idx := testIndex(`{{.Out.x}}`)
	r := testResult(`{"x":1}`)["w-t1"]
	r.Runs[0].Command = "logbook pepa sweep other.pepa -o json"
	if err := WriteResult(dir, r); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadResults(dir, idx); err == nil || !strings.Contains(err.Error(), "record it again") {
		t.Fatalf("stale result: err = %v", err)
	}
	r.ID = "gone"
	if err := WriteResult(dir, r); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "w-t1.json"))
	if _, err := LoadResults(dir, idx); err == nil {
		t.Fatal("a result for no entry was accepted")
	}
}

func TestIndexChecks(t *testing.T) {
	bad := map[string]func(*Index){
		"status":      func(i *Index) { i.Entries[0].Status = "done" },
		"missing":     func(i *Index) { i.Entries[0].Status = Partial },
		"work":        func(i *Index) { i.Entries[0].Work = "x" },
		"command":     func(i *Index) { i.Entries[0].Commands = []string{"rm -rf /"} },
		"template":    func(i *Index) { i.Entries[0].Ours = "{{.Out" },
		"row":         func(i *Index) { i.Entries[0].Authors.Rows = [][]string{{"1"}} },
		"same_as":     func(i *Index) { i.Entries[0].SameAs = "nope" },
		"duplicate":   func(i *Index) { i.Entries = append(i.Entries, i.Entries[0]) },
		"no commands": func(i *Index) { i.Entries[0].Commands = nil },
	}
	for name, f := range bad {
		idx := testIndex(`{{.Out.x}}`)
		f(idx)
		if err := idx.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := testIndex(`{{.Out.x}}`).check(); err != nil {
		t.Fatal(err)
	}
}

// A recorded run with no template to render it is an error, not a
// silently empty cell.
func TestResultWithoutTemplateFails(t *testing.T) {
	idx := testIndex("")
	if _, err := Render(idx, testResult(`{"x":1}`)); err == nil {
		t.Fatal("rendered a result with no template")
	}
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-logbook")
	// The fake binary prints its arguments as JSON, or fails on "fail".
	script := "#!/bin/sh\nif [ \"$1\" = fail ]; then echo nope; exit 0; fi\nprintf '{\"args\":\"%s\",\"env\":\"%s\"}\\n' \"$*\" \"$REPRO_TEST_VAR\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REPRO_TEST_VAR", "secret-url")
	e := &Entry{ID: "x", Commands: []string{`logbook pepa sweep "$REPRO_TEST_VAR" -o json`, "logbook two"}}
	r, err := Record(context.Background(), e, RecordOptions{Logbook: fake, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 2 || r.CPUs < 1 || r.RecordedAt == "" {
		t.Fatalf("record: %+v", r)
	}
	if r.Runs[0].Command != e.Commands[0] {
		t.Errorf("recorded command %q, want the index's %q (variables unexpanded)", r.Runs[0].Command, e.Commands[0])
	}
	var out struct{ Args, Env string }
	if err := json.Unmarshal(r.Runs[0].Output, &out); err != nil || out.Args != "pepa sweep secret-url -o json" {
		t.Errorf("output %s (%v): the command did not run through the given binary with the environment", r.Runs[0].Output, err)
	}
	if _, err := Record(context.Background(), &Entry{ID: "y", Commands: []string{"logbook fail"}}, RecordOptions{Logbook: fake, Dir: dir}); err == nil {
		t.Error("a command printing no JSON was recorded")
	}
	if _, err := Record(context.Background(), &Entry{ID: "z", Commands: []string{"logbook two; exit 3"}}, RecordOptions{Logbook: fake, Dir: dir}); err == nil {
		t.Error("a failing command was recorded")
	}
}

func TestSlugsAsGitHub(t *testing.T) {
	s := newSlugger()
	for heading, want := range map[string]string{
		"Table 6.1":                    "table-61",
		"Figure 5.2 (stage processes)": "figure-52-stage-processes",
		"Scalable Architecture of Cloud Application Based on CQRS and Event Sourcing (2015)": "scalable-architecture-of-cloud-application-based-on-cqrs-and-event-sourcing-2015",
		"Redis: batch size": "redis-batch-size",
	} {
		if got := s.add(heading); got != want {
			t.Errorf("%q: %q, want %q", heading, got, want)
		}
	}
	if got := s.add("Table 6.1"); got != "table-61-1" {
		t.Errorf("repeat: %q", got)
	}
}

// The kv entries have no recorded run yet: their template is checked
// against a real output of `logbook bench kv -o json` (one row of it
// failed), so the first recording renders.
// indexEntry is the index's entry id and the sample output in
// testdata/file, for checking a template before its first recording.
func indexEntry(t *testing.T, id, file string) (*Index, *Entry, []byte) {
	t.Helper()
	idx, err := LoadIndex(filepath.Join("..", "..", IndexPath))
	if err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := idx.Entry(id)
	if !ok {
		t.Fatalf("no entry %s", id)
	}
	return idx, e, sample
}

func TestKVTemplateRendersASampleOutput(t *testing.T) {
	idx, e, sample := indexEntry(t, "blob-redis-batch", "kv-batch.json")
	r := &Result{ID: e.ID, Runs: []Run{{Command: e.Commands[0], Output: sample}}}
	out, err := ours(e, r)
	if err != nil {
		t.Fatal(err)
	}
	// The Redis entry shows Redis's rows only: the sample's failed Redis
	// row, not the embedded backend's.
	if !strings.Contains(out, "| redis | batch | 32768 | failed: kv: backend unavailable") || strings.Contains(out, "embedded") {
		t.Errorf("kv template output:\n%s", out)
	}
	// A rate under 100 puts/s keeps a decimal (100 MB values: 0.3/s),
	// and the posts' bytes per message stand beside their figure.
	e, ok := idx.Entry("blob-redis-large")
	if !ok {
		t.Fatal("no entry blob-redis-large")
	}
	small := `{"rows":[{"backend":"redis","table":"payload","setting":"100000000","ops_per_sec":0.31,"p99_ms":2968,"bytes_per_message":100644768,"seed":1.2,"seed_bytes_per_message":152}]}`
	r = &Result{ID: e.ID, Runs: []Run{{Command: e.Commands[0], Output: json.RawMessage(small)}}}
	if out, err = ours(e, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| redis | payload | 100000000 | 0.3 | 2968.0 | 100644768 | 1.2 (152 B/msg) |") {
		t.Errorf("kv template output:\n%s", out)
	}
}

// The long-run entries' template (KVLongResult rows, by label) is checked
// against a sample written from KVLongRow's JSON fields (lab/bench), one
// row of it failed and one without the fields it may leave out.
func TestKVLongTemplateRendersASampleOutput(t *testing.T) {
	_, e, sample := indexEntry(t, "blob-cassandra-long", "kv-long.json")
	r := &Result{ID: e.ID}
	for _, c := range e.Commands {
		r.Runs = append(r.Runs, Run{Command: c, Output: sample})
	}
	out, err := ours(e, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 100 B, RF 1, ONE | cassandra-blobs | RF 1 ONE | 0.10 | 296 | 3,456 | 2,842 | 0.82 |  |",
		"| 100 B, RF 2, TWO | cassandra-blobs | RF 2 TWO | failed: Cannot achieve consistency level TWO |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kv long template output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| redis |") {
		t.Errorf("the Cassandra entry shows Redis's row:\n%s", out)
	}
}

// sum adds a field over a list's elements and fails on an element
// without it, as the other functions fail on a missing value.
func TestSumOverAList(t *testing.T) {
	idx := testIndex(`{{f0 (sum .Out.rows "failures")}} {{f1 (sum .Out.rows "cells.a.mean")}}`)
	out, err := Render(idx, testResult(`{"rows":[{"failures":2,"cells":{"a":{"mean":1.25}}},{"failures":3,"cells":{"a":{"mean":2}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "5 3.2") {
		t.Errorf("sum rendered:\n%s", out)
	}
	if _, err := Render(idx, testResult(`{"rows":[{"failures":2,"cells":{"a":{"mean":1}}},{"cells":{"a":{"mean":2}}}]}`)); err == nil {
		t.Error("a row without the field was summed")
	}
}

// Entries recorded in one invocation that list the same command share
// its run: the command runs once, and the later entry's run says it was
// reused; a command not seen before still runs.
func TestRecordSharesARunBetweenEntries(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-logbook")
	// Each call appends a line to calls, and prints how many there were.
	script := "#!/bin/sh\necho x >> calls\nprintf '{\"n\":%d}\\n' \"$(wc -l < calls)\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	shared := NewSharedRuns()
	opt := RecordOptions{Logbook: fake, Dir: dir, Shared: shared}
	a, err := Record(context.Background(), &Entry{ID: "a", Commands: []string{"logbook same"}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Record(context.Background(), &Entry{ID: "b", Commands: []string{"logbook same", "logbook other"}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Runs[0].Output) != `{"n":1}` || a.Runs[0].Reused {
		t.Errorf("first entry's run: %s, reused %v", a.Runs[0].Output, a.Runs[0].Reused)
	}
	if string(b.Runs[0].Output) != `{"n":1}` || !b.Runs[0].Reused {
		t.Errorf("second entry's shared run: %s, reused %v; want the first run's output, marked reused", b.Runs[0].Output, b.Runs[0].Reused)
	}
	if string(b.Runs[1].Output) != `{"n":2}` || b.Runs[1].Reused {
		t.Errorf("second entry's own run: %s, reused %v", b.Runs[1].Output, b.Runs[1].Reused)
	}
	// A command an entry lists twice runs twice, shared or not.
	d, err := Record(context.Background(), &Entry{ID: "d", Commands: []string{"logbook twice", "logbook twice"}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Runs[0].Output) != `{"n":3}` || string(d.Runs[1].Output) != `{"n":4}` || d.Runs[1].Reused {
		t.Errorf("an entry's repeated command: %s then %s (reused %v), want two runs", d.Runs[0].Output, d.Runs[1].Output, d.Runs[1].Reused)
	}
	// Without Shared every entry runs its commands.
	c, err := Record(context.Background(), &Entry{ID: "c", Commands: []string{"logbook same"}}, RecordOptions{Logbook: fake, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Runs[0].Output) != `{"n":5}` {
		t.Errorf("unshared run: %s, want a new run", c.Runs[0].Output)
	}
}

// Table 6.1's template names the knee when a rate past it bent, and says
// there was none within the sweep when the top rate still passed.
func TestCapacityTemplateSaysWhetherTheSweepFoundAKnee(t *testing.T) {
	idx, err := LoadIndex(filepath.Join("..", "..", IndexPath))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := idx.Entry("thesis-table-6-1")
	if !ok {
		t.Fatal("no entry thesis-table-6-1")
	}
	row := func(rate float64) string {
		return fmt.Sprintf(`{"offered_per_sec":%g,"achieved_per_sec":%g,"p50_ms":1,"p75_ms":1,"p95_ms":2,"p99_ms":3,"max_ms":4,"requests":10,"failures":0,"cpu":{"replica":{"of_quota":0.5}}}`, rate, rate)
	}
	output := func(knee float64) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"knee_per_sec":%g,"per_node_cpus":0.25,"season":"s","rows":[%s,%s]}`, knee, row(100), row(200)))
	}
	for knee, want := range map[float64]string{100: "The knee (the highest rate", 200: "No knee within the sweep"} {
		out, err := ours(e, &Result{ID: e.ID, Runs: []Run{{Command: e.Commands[0], Output: output(knee)}}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("knee %g: the output lacks %q:\n%s", knee, want, out)
		}
	}
}
