package repro

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/logbook/logbook/lab/plot"
)

// ChartDir holds the figures drawn from recorded runs, one SVG per entry
// with a Chart, named by its id.
const ChartDir = "docs/img/repro"

// Chart draws a figure from a recorded run: each line ours, solid, and
// beside it the authors' line dashed in the same colour where they
// printed its values. The run is that of the entry's SameAs (a figure
// drawn from a table's numbers) or else the entry's own.
type Chart struct {
	X      string       `json:"x"` // the x axis's label
	Panels []ChartPanel `json:"panels"`
}

// ChartPanel is one panel of a chart, stacked over the shared x axis.
type ChartPanel struct {
	Y     string      `json:"y"` // the y axis's label
	LogY  bool        `json:"log_y,omitempty"`
	Lines []ChartLine `json:"lines"`
}

// ChartLine is one line of ours and, optionally, the authors' beside it.
type ChartLine struct {
	Name string `json:"name"`
	// Ours: in the output of command Run (0-based), the list at the
	// dotted path Rows (default "rows"), of it the rows whose fields
	// equal Where, and in each row x and y at the dotted paths X and Y.
	Run   int               `json:"run,omitempty"`
	Rows  string            `json:"rows,omitempty"`
	Where map[string]string `json:"where,omitempty"`
	X     string            `json:"x"`
	Y     string            `json:"y"`
	// Authors, if set, is the authors' line from their table.
	Authors *AuthorsLine `json:"authors,omitempty"`
}

// AuthorsLine picks a line out of the authors' table: column Column
// (x from each row's first cell), or row Row (x from the column
// headers, or from X) over the columns Cols (default all but the
// first). Cells are numbers as printed ("51", "37.1k"); a cell of "–"
// or "" is a point they did not print.
type AuthorsLine struct {
	Column int       `json:"column,omitempty"`
	Row    *int      `json:"row,omitempty"`
	Cols   []int     `json:"cols,omitempty"`
	X      []float64 `json:"x,omitempty"`
	// Times and Over, if set, are dotted paths into the line's run
	// output: the authors' values are drawn multiplied by Times ÷ Over,
	// in our units where the run says how its units relate to theirs.
	Times string `json:"times,omitempty"`
	Over  string `json:"over,omitempty"`
}

// hasAuthors says whether any line has the authors' beside it.
func (c *Chart) hasAuthors() bool {
	for _, p := range c.Panels {
		for _, l := range p.Lines {
			if l.Authors != nil {
				return true
			}
		}
	}
	return false
}

// legend says how to read the chart's lines.
func (c *Chart) legend() string {
	if c.hasAuthors() {
		return "ours solid, the authors' dashed"
	}
	return "ours (the authors printed no values)"
}

func (c *Chart) check() error {
	if c == nil {
		return nil
	}
	if c.X == "" || len(c.Panels) == 0 {
		return fmt.Errorf("an x label and a panel are required")
	}
	for _, p := range c.Panels {
		if p.Y == "" || len(p.Lines) == 0 {
			return fmt.Errorf("each panel needs a y label and a line")
		}
		for _, l := range p.Lines {
			if l.Name == "" || l.X == "" || l.Y == "" {
				return fmt.Errorf("each line needs a name, x and y")
			}
			if a := l.Authors; a != nil && (a.Row == nil) == (a.Column < 1) {
				return fmt.Errorf("line %q: the authors' line is a column (1 or more) or a row, one of them", l.Name)
			}
			if a := l.Authors; a != nil && (a.Times == "") != (a.Over == "") {
				return fmt.Errorf("line %q: the authors' scale needs both times and over", l.Name)
			}
		}
	}
	return nil
}

// ChartFile is where the entry's chart is written, relative to the
// repository's root.
func ChartFile(id string) string { return filepath.Join(ChartDir, id+".svg") }

// chartSource is the entry whose recorded run the chart draws.
func chartSource(e *Entry) string {
	if e.SameAs != "" {
		return e.SameAs
	}
	return e.ID
}

// Charts draws every entry's chart whose run is recorded, keyed by its
// ChartFile. Like a template, a chart naming a value the output lacks is
// an error, never a gap in a line.
func Charts(idx *Index, results map[string]*Result) (map[string][]byte, error) {
	works := map[string]Work{}
	for _, w := range idx.Works {
		works[w.Key] = w
	}
	out := map[string][]byte{}
	for i := range idx.Entries {
		e := &idx.Entries[i]
		r := results[chartSource(e)]
		if e.Chart == nil || r == nil {
			continue
		}
		src, _ := idx.Entry(chartSource(e))
		fig, err := chartFigure(e, src, r)
		if err != nil {
			return nil, err
		}
		w := works[e.Work]
		fig.Title = fmt.Sprintf("%s of %s %d: %s", e.Item, w.ShortName(), w.Year, e.Chart.legend())
		var b bytes.Buffer
		if err := plot.Write(&b, "svg", fig); err != nil {
			return nil, fmt.Errorf("entry %s: chart: %w", e.ID, err)
		}
		out[ChartFile(e.ID)] = b.Bytes()
	}
	return out, nil
}

// chartFigure makes the figure of e's chart from src's recorded run r.
func chartFigure(e, src *Entry, r *Result) (plot.Figure, error) {
	fail := func(format string, a ...any) (plot.Figure, error) {
		return plot.Figure{}, fmt.Errorf("entry %s: chart: %s", e.ID, fmt.Sprintf(format, a...))
	}
	outs := make([]any, len(r.Runs))
	for i, run := range r.Runs {
		if err := json.Unmarshal(run.Output, &outs[i]); err != nil {
			return fail("run %d's output: %v", i+1, err)
		}
	}
	fig := plot.Figure{XLabel: e.Chart.X}
	for _, cp := range e.Chart.Panels {
		panel := plot.Panel{YLabel: cp.Y, LogY: cp.LogY}
		for li, l := range cp.Lines {
			if l.Run < 0 || l.Run >= len(outs) {
				return fail("line %q: run %d of %d", l.Name, l.Run, len(outs))
			}
			rowsPath := l.Rows
			if rowsPath == "" {
				rowsPath = "rows"
			}
			v, err := get(outs[l.Run], rowsPath)
			if err != nil {
				return fail("line %q: %v", l.Name, err)
			}
			rows, ok := v.([]any)
			if !ok {
				return fail("line %q: %q is not a list", l.Name, rowsPath)
			}
			ours := plot.Series{Name: l.Name, Points: true, Colour: li + 1}
			for _, row := range rows {
				if !matches(row, l.Where) {
					continue
				}
				x, err := numberAt(row, l.X)
				if err != nil {
					return fail("line %q: %v", l.Name, err)
				}
				y, err := numberAt(row, l.Y)
				if err != nil {
					return fail("line %q: %v", l.Name, err)
				}
				ours.X, ours.Y = append(ours.X, x), append(ours.Y, y)
			}
			if len(ours.X) == 0 {
				return fail("line %q: no row of the output matches %v", l.Name, l.Where)
			}
			panel.Series = append(panel.Series, ours)
			if l.Authors != nil {
				theirs, err := authorsSeries(src.Authors, l.Authors)
				if err != nil {
					return fail("line %q: the authors' values: %v", l.Name, err)
				}
				if l.Authors.Times != "" {
					times, err := numberAt(outs[l.Run], l.Authors.Times)
					if err != nil {
						return fail("line %q: the authors' scale: %v", l.Name, err)
					}
					over, err := numberAt(outs[l.Run], l.Authors.Over)
					if err != nil {
						return fail("line %q: the authors' scale: %v", l.Name, err)
					}
					if over == 0 {
						return fail("line %q: the authors' scale: %q is zero", l.Name, l.Authors.Over)
					}
					for k := range theirs.Y {
						theirs.Y[k] *= times / over
					}
				}
				theirs.Name, theirs.Colour, theirs.Dashed, theirs.Points = l.Name+", the authors'", li+1, true, true
				panel.Series = append(panel.Series, theirs)
			}
		}
		fig.Panels = append(fig.Panels, panel)
	}
	return fig, nil
}

func matches(row any, where map[string]string) bool {
	for k, want := range where {
		v, err := get(row, k)
		if err != nil {
			return false
		}
		got := fmt.Sprint(v)
		if f, ok := v.(float64); ok {
			got = strconv.FormatFloat(f, 'f', -1, 64)
		}
		if got != want {
			return false
		}
	}
	return true
}

func numberAt(row any, path string) (float64, error) {
	v, err := get(row, path)
	if err != nil {
		return 0, err
	}
	f, err := number(v)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", path, err)
	}
	return f, nil
}

// authorsSeries reads one line out of the authors' table.
func authorsSeries(v Values, a *AuthorsLine) (plot.Series, error) {
	var s plot.Series
	add := func(xs, ys string, x float64, useX bool) error {
		y, ok, err := printed(ys)
		if err != nil || !ok {
			return err
		}
		if !useX {
			var okx bool
			if x, okx, err = printed(xs); err != nil {
				return fmt.Errorf("x: %v", err)
			} else if !okx {
				return fmt.Errorf("x %q is no number", xs)
			}
		}
		s.X, s.Y = append(s.X, x), append(s.Y, y)
		return nil
	}
	switch {
	case a.Row != nil:
		if *a.Row < 0 || *a.Row >= len(v.Rows) {
			return s, fmt.Errorf("row %d of %d", *a.Row, len(v.Rows))
		}
		row := v.Rows[*a.Row]
		cols := a.Cols
		if cols == nil {
			for j := 1; j < len(row); j++ {
				cols = append(cols, j)
			}
		}
		if a.X != nil && len(a.X) != len(cols) {
			return s, fmt.Errorf("%d x values for %d columns", len(a.X), len(cols))
		}
		for k, j := range cols {
			if j < 0 || j >= len(row) || j >= len(v.Columns) {
				return s, fmt.Errorf("column %d of %d", j, len(row))
			}
			var err error
			if a.X != nil {
				err = add("", row[j], a.X[k], true)
			} else {
				err = add(v.Columns[j], row[j], 0, false)
			}
			if err != nil {
				return s, err
			}
		}
	case a.Column > 0:
		for _, row := range v.Rows {
			if a.Column >= len(row) {
				return s, fmt.Errorf("column %d of %d", a.Column, len(row))
			}
			if err := add(row[0], row[a.Column], 0, false); err != nil {
				return s, err
			}
		}
	default:
		return s, fmt.Errorf("neither a column (1 or more) nor a row")
	}
	if len(s.X) == 0 {
		return s, fmt.Errorf("no value printed")
	}
	return s, nil
}

// printed reads a number as the authors printed it: "0.83", "51",
// "37.1k"; "" and "–" are a value not printed (ok false).
func printed(s string) (v float64, ok bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "–" || s == "-" {
		return 0, false, nil
	}
	mult := 1.0
	if rest, found := strings.CutSuffix(s, "k"); found {
		s, mult = rest, 1000
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not a number", s)
	}
	return f * mult, true, nil
}

// WriteCharts writes the charts under root and removes any other SVG in
// ChartDir, so that a chart of a renamed entry leaves no orphan.
func WriteCharts(root string, charts map[string][]byte) error {
	dir := filepath.Join(root, ChartDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		return err
	}
	for _, f := range old {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return err
		}
		if _, keep := charts[rel]; !keep {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for rel, b := range charts {
		if err := os.WriteFile(filepath.Join(root, rel), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
