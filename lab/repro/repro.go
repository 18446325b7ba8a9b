// Package repro keeps the index of reproductions: every table and figure
// of the published works logbook reruns, the command that reruns each,
// the authors' values as they printed them, and ours, rendered from a
// recorded run's JSON output by a template — never typed by hand — into
// docs/reproductions.md.
//
// The index (index.json) is written by hand; a recorded run
// (results/ID.json) is written by Record, from the entry's commands run
// against a logbook binary; Render turns the two into the document.
// TestReproductionsUpToDate fails when the document differs from what
// Render makes of them.
package repro

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// Index is the hand-written list of reproductions (index.json).
type Index struct {
	// Works are the published works, by a short key the entries use.
	Works []Work `json:"works"`
	// NotExperiments names the tables and figures of the works that
	// measure nothing (diagrams, hardware lists), so a reader sees they
	// were not forgotten.
	NotExperiments []string `json:"not_experiments"`
	Entries        []Entry  `json:"entries"`
}

// Work is one published work, cited by title, authors and year.
type Work struct {
	Key     string `json:"key"`
	Title   string `json:"title"`
	Authors string `json:"authors"`
	Year    int    `json:"year"`
	Kind    string `json:"kind"` // "master's thesis, AGH Kraków", "paper, Newcastle University", …
	// Short names the work in the index's first column; default: the
	// authors' last names.
	Short string `json:"short,omitempty"`
}

// ShortName is Short, or the authors' last names.
func (w Work) ShortName() string {
	if w.Short != "" {
		return w.Short
	}
	return shortAuthors(w.Authors)
}

// Entry is one table or figure of a work.
type Entry struct {
	ID       string `json:"id"`
	Work     string `json:"work"`
	Item     string `json:"item"`     // "Table 6.1", "Figure 5.2"
	Measures string `json:"measures"` // what it measures, one line
	// Commands rerun it: logbook command lines printing JSON, run in
	// order by a shell (so "$PG" and the like come from the environment
	// and stay out of the record). Labels, if given, name each command's
	// output for the template (one per command).
	Commands []string `json:"commands"`
	Labels   []string `json:"labels,omitempty"`
	// Size says how the recorded size differs from the authors' (a
	// reduced size), if it does.
	Size string `json:"size,omitempty"`
	// Authors are the authors' values, typed once from the work.
	Authors Values `json:"authors"`
	// Ours is a text/template over the recorded run (see Data) that
	// renders our values in the shape of the authors'. It may be left
	// empty until the command's output is known (a command still being
	// built): a recorded run then fails the render until it is written.
	Ours string `json:"ours,omitempty"`
	// Beside: the template prints the authors' values beside ours, so
	// the authors' table is not printed apart once a run is recorded.
	Beside bool `json:"beside,omitempty"`
	// Deterministic: the commands compute rather than measure (a model
	// solved), so the machine's load does not change ours.
	Deterministic bool `json:"deterministic,omitempty"`
	// SameAs: a figure drawn from the numbers of another entry.
	SameAs string `json:"same_as,omitempty"`
	// Chart draws the figure from the recorded run (SameAs's, or else
	// the entry's own) into ChartFile(ID).
	Chart   *Chart `json:"chart,omitempty"`
	Differs string `json:"differs"`
	Status  string `json:"status"` // reproduced, partial, not yet
	Missing string `json:"missing,omitempty"`
}

// Values are the authors' values: a table (Columns and Rows, cells as
// printed) and/or a note (values given in prose, or what a figure shows
// when its values are not printed).
type Values struct {
	Columns []string   `json:"columns,omitempty"`
	Rows    [][]string `json:"rows,omitempty"`
	Note    string     `json:"note,omitempty"`
}

// The statuses an entry may have.
const (
	Reproduced = "reproduced"
	Partial    = "partial"
	NotYet     = "not yet"
)

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// LoadIndex reads and checks an index file.
func LoadIndex(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var idx Index
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := idx.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &idx, nil
}

func (idx *Index) check() error {
	works := map[string]bool{}
	for _, w := range idx.Works {
		if w.Key == "" || w.Title == "" || w.Authors == "" || w.Year == 0 {
			return fmt.Errorf("work %q: key, title, authors and year are required", w.Key)
		}
		works[w.Key] = true
	}
	ids := map[string]bool{}
	for _, e := range idx.Entries {
		if !idPattern.MatchString(e.ID) {
			return fmt.Errorf("entry id %q: lower-case letters, digits and dashes", e.ID)
		}
		if ids[e.ID] {
			return fmt.Errorf("entry %s: id used twice", e.ID)
		}
		ids[e.ID] = true
		if !works[e.Work] {
			return fmt.Errorf("entry %s: unknown work %q", e.ID, e.Work)
		}
		if e.Item == "" || e.Measures == "" || e.Differs == "" {
			return fmt.Errorf("entry %s: item, measures and differs are required", e.ID)
		}
		switch e.Status {
		case Reproduced, Partial, NotYet:
		default:
			return fmt.Errorf("entry %s: status %q is none of %q, %q, %q", e.ID, e.Status, Reproduced, Partial, NotYet)
		}
		if e.Status != Reproduced && e.Missing == "" {
			return fmt.Errorf("entry %s: status %q must say what is missing", e.ID, e.Status)
		}
		if e.Labels != nil && len(e.Labels) != len(e.Commands) {
			return fmt.Errorf("entry %s: %d labels for %d commands", e.ID, len(e.Labels), len(e.Commands))
		}
		for _, c := range e.Commands {
			if !strings.HasPrefix(c, "logbook ") {
				return fmt.Errorf("entry %s: command %q does not start with \"logbook \"", e.ID, c)
			}
		}
		if len(e.Commands) == 0 && e.Ours != "" {
			return fmt.Errorf("entry %s: an ours template with no command to render", e.ID)
		}
		if e.Ours != "" {
			if _, err := parseTemplate(e.ID, e.Ours); err != nil {
				return err
			}
		}
		for i, r := range e.Authors.Rows {
			if len(e.Authors.Columns) > 0 && len(r) != len(e.Authors.Columns) {
				return fmt.Errorf("entry %s: authors' row %d has %d cells for %d columns", e.ID, i+1, len(r), len(e.Authors.Columns))
			}
		}
	}
	for _, e := range idx.Entries {
		if e.SameAs != "" && !ids[e.SameAs] {
			return fmt.Errorf("entry %s: same_as %q is no entry", e.ID, e.SameAs)
		}
		if err := e.Chart.check(); err != nil {
			return fmt.Errorf("entry %s: chart: %w", e.ID, err)
		}
		if e.Chart != nil && e.SameAs == "" && len(e.Commands) == 0 {
			return fmt.Errorf("entry %s: a chart with no run to draw (neither same_as nor a command)", e.ID)
		}
	}
	return nil
}

// Entry returns the entry with this id.
func (idx *Index) Entry(id string) (*Entry, bool) {
	i := slices.IndexFunc(idx.Entries, func(e Entry) bool { return e.ID == id })
	if i < 0 {
		return nil, false
	}
	return &idx.Entries[i], true
}

// Result is a recorded run of an entry's commands (results/ID.json).
type Result struct {
	ID         string `json:"id"`
	RecordedAt string `json:"recorded_at"` // RFC 3339, UTC
	Commit     string `json:"commit"`      // the repository's HEAD, "+dirty" if the tree had changes
	GoVersion  string `json:"go_version"`
	CPUs       int    `json:"cpus"`
	// Load is the machine's load average (1 minute) before the first
	// command, its highest sampled during the run, and after the last.
	Load    Load    `json:"load_average"`
	Seconds float64 `json:"seconds"`
	Runs    []Run   `json:"runs"`
}

// Load is the 1-minute load average around a recorded run.
type Load struct {
	Before float64 `json:"before"`
	Max    float64 `json:"max"`
	After  float64 `json:"after"`
}

// Run is one command of an entry and its JSON output, verbatim.
type Run struct {
	Command string          `json:"command"`
	Seconds float64         `json:"seconds"`
	Output  json.RawMessage `json:"output"`
	// Reused: not run for this entry but taken from another entry's run
	// of the same command in the same invocation of the recorder.
	Reused bool `json:"reused,omitempty"`
}

// LoadResults reads every results/ID.json in dir whose id the index has;
// a file for an unknown id is an error (a renamed entry leaves no orphan).
func LoadResults(dir string, idx *Index) (map[string]*Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]*Result{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		e, ok := idx.Entry(r.ID)
		if !ok || filepath.Base(f) != r.ID+".json" {
			return nil, fmt.Errorf("%s: result for %q, which is no entry of the index (or the file is misnamed)", f, r.ID)
		}
		if len(r.Runs) != len(e.Commands) {
			return nil, fmt.Errorf("%s: %d runs for the entry's %d commands: record it again", f, len(r.Runs), len(e.Commands))
		}
		for i, run := range r.Runs {
			if run.Command != e.Commands[i] {
				return nil, fmt.Errorf("%s: run %d was %q, the entry's command is now %q: record it again", f, i+1, run.Command, e.Commands[i])
			}
		}
		out[r.ID] = &r
	}
	return out, nil
}

// Data is what an entry's Ours template sees: Out is the first command's
// output decoded from JSON (objects as maps, numbers as float64), Runs
// every command's, and Authors the entry's authors' values.
type Data struct {
	Out     any
	Runs    []RunData
	Authors Values
}

// RunData is one command's output for a template.
type RunData struct {
	Label   string
	Command string
	Out     any
}

func parseTemplate(id, text string) (*template.Template, error) {
	t, err := template.New(id).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("entry %s: ours template: %w", id, err)
	}
	return t, nil
}

// ours executes the entry's template on the result. A field the output
// does not have is an error, never an empty cell.
func ours(e *Entry, r *Result) (string, error) {
	if e.Ours == "" {
		return "", fmt.Errorf("entry %s: a run is recorded but the entry has no ours template to render it", e.ID)
	}
	t, err := parseTemplate(e.ID, e.Ours)
	if err != nil {
		return "", err
	}
	d := Data{Authors: e.Authors}
	for i, run := range r.Runs {
		var v any
		if err := json.Unmarshal(run.Output, &v); err != nil {
			return "", fmt.Errorf("entry %s: run %d's output: %w", e.ID, i+1, err)
		}
		label := ""
		if e.Labels != nil {
			label = e.Labels[i]
		}
		d.Runs = append(d.Runs, RunData{Label: label, Command: run.Command, Out: v})
	}
	if len(d.Runs) > 0 {
		d.Out = d.Runs[0].Out
	}
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("entry %s: ours template: %w", e.ID, err)
	}
	s := strings.TrimSpace(b.String())
	if strings.Contains(s, "<no value>") || strings.Contains(s, "<nil>") {
		return "", fmt.Errorf("entry %s: ours template printed a missing value: %q", e.ID, s)
	}
	return s, nil
}

// errMissing is what the template functions return for a value the
// output does not have.
var errMissing = errors.New("no such value in the output")
