package repro

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chartIndex is testIndex's table with a figure drawn from its run: a
// line of ours with the authors' column beside it, and a line of ours
// only from the rows of one group.
func chartIndex(lines ...ChartLine) *Index {
	idx := testIndex(`{{range .Out.rows}}{{f1 .x}}{{end}}`)
	idx.Entries[0].Authors = Values{Columns: []string{"a", "x"}, Rows: [][]string{{"1", "0.5"}, {"2", "1.2k"}, {"3", "–"}}}
	idx.Entries = append(idx.Entries, Entry{
		ID: "w-f1", Work: "w", Item: "Figure 1", Measures: "Table 1 as a chart", SameAs: "w-t1",
		Chart:   &Chart{X: "a", Panels: []ChartPanel{{Y: "x", Lines: lines}}},
		Differs: "as Table 1", Status: Reproduced,
	})
	return idx
}

const chartOutput = `{"rows":[{"a":1,"x":0.25,"g":"p"},{"a":2,"x":900,"g":"q"},{"a":3,"x":1000,"g":"p"}]}`

func TestChartDrawsOursBesideTheAuthors(t *testing.T) {
	idx := chartIndex(
		ChartLine{Name: "x", X: "a", Y: "x", Authors: &AuthorsLine{Column: 1}},
		ChartLine{Name: "x of p", X: "a", Y: "x", Where: map[string]string{"g": "p"}},
	)
	if err := idx.check(); err != nil {
		t.Fatal(err)
	}
	results := testResult(chartOutput)
	fig, err := chartFigure(&idx.Entries[1], &idx.Entries[0], results["w-t1"])
	if err != nil {
		t.Fatal(err)
	}
	s := fig.Panels[0].Series
	if len(s) != 3 {
		t.Fatalf("%d series, want ours, the authors' and the group's: %+v", len(s), s)
	}
	if !slices.Equal(s[0].X, []float64{1, 2, 3}) || !slices.Equal(s[0].Y, []float64{0.25, 900, 1000}) || s[0].Dashed {
		t.Errorf("ours: %+v", s[0])
	}
	// "1.2k" is 1,200; "–" a point the authors did not print.
	if !slices.Equal(s[1].X, []float64{1, 2}) || !slices.Equal(s[1].Y, []float64{0.5, 1200}) || !s[1].Dashed || s[1].Colour != s[0].Colour {
		t.Errorf("the authors': %+v", s[1])
	}
	if !slices.Equal(s[2].X, []float64{1, 3}) || !slices.Equal(s[2].Y, []float64{0.25, 1000}) || s[2].Colour == s[0].Colour {
		t.Errorf("the group's: %+v", s[2])
	}

	charts, err := Charts(idx, results)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(charts[ChartFile("w-f1")])
	for _, want := range []string{"<svg", "Figure 1 of Author 2000", "x, the authors", "x of p"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	doc, err := Render(idx, results)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "](img/repro/w-f1.svg)") {
		t.Errorf("the page does not show the chart:\n%s", doc)
	}
	// No recorded run, no chart and no image.
	if charts, err := Charts(idx, nil); err != nil || len(charts) != 0 {
		t.Errorf("charts without a run: %v, %v", charts, err)
	}
}

// A chart naming a value the output or the authors' table lacks fails,
// as a template does, rather than draw a line with a gap.
func TestChartMissingValueFailsLoudly(t *testing.T) {
	for _, l := range []ChartLine{
		{Name: "y", X: "a", Y: "y"},
		{Name: "x", X: "b", Y: "x"},
		{Name: "x", X: "a", Y: "x", Rows: "nope"},
		{Name: "x", X: "a", Y: "x", Run: 1},
		{Name: "x", X: "a", Y: "x", Where: map[string]string{"g": "r"}},
		{Name: "x", X: "a", Y: "x", Authors: &AuthorsLine{Column: 2}},
		{Name: "x", X: "a", Y: "g"},
	} {
		if _, err := Charts(chartIndex(l), testResult(chartOutput)); err == nil {
			t.Errorf("%+v: drawn without an error", l)
		}
	}
	bad := chartIndex(ChartLine{Name: "x", X: "a", Y: "x", Authors: &AuthorsLine{}})
	if err := bad.check(); err == nil {
		t.Error("an authors' line with neither a column nor a row passed the check")
	}
	bad = chartIndex(ChartLine{Name: "x", X: "a", Y: "x"})
	bad.Entries[0].Authors.Rows[1][1] = "many"
	bad.Entries[1].Chart.Panels[0].Lines[0].Authors = &AuthorsLine{Column: 1}
	if _, err := Charts(bad, testResult(chartOutput)); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("an unreadable authors' cell: %v", err)
	}
}

func TestChartReadsTheAuthorsRow(t *testing.T) {
	v := Values{Columns: []string{"rate", "125", "150", "175"}, Rows: [][]string{{"p99", "99", "100", "132"}}}
	row := 0
	s, err := authorsSeries(v, &AuthorsLine{Row: &row})
	if err != nil || !slices.Equal(s.X, []float64{125, 150, 175}) || !slices.Equal(s.Y, []float64{99, 100, 132}) {
		t.Errorf("row by headers: %+v, %v", s, err)
	}
	s, err = authorsSeries(v, &AuthorsLine{Row: &row, Cols: []int{1, 3}, X: []float64{1, 4}})
	if err != nil || !slices.Equal(s.X, []float64{1, 4}) || !slices.Equal(s.Y, []float64{99, 132}) {
		t.Errorf("row by given x: %+v, %v", s, err)
	}
	if _, err := authorsSeries(v, &AuthorsLine{Row: &row, Cols: []int{1}, X: []float64{1, 2}}); err == nil {
		t.Error("two x values for one column accepted")
	}
}

// The authors' values drawn in our units when the run says how they
// relate (Times ÷ Over from the output).
func TestChartScalesTheAuthorsValues(t *testing.T) {
	idx := chartIndex(ChartLine{Name: "x", X: "a", Y: "x", Authors: &AuthorsLine{Column: 1, Times: "ours", Over: "theirs"}})
	out := `{"ours":3,"theirs":2,"rows":[{"a":1,"x":1},{"a":2,"x":2},{"a":3,"x":3}]}`
	fig, err := chartFigure(&idx.Entries[1], &idx.Entries[0], testResult(out)["w-t1"])
	if err != nil {
		t.Fatal(err)
	}
	if got := fig.Panels[0].Series[1].Y; !slices.Equal(got, []float64{0.75, 1800}) {
		t.Errorf("the authors' values scaled by 3/2: %v", got)
	}
	idx.Entries[1].Chart.Panels[0].Lines[0].Authors.Over = ""
	if err := idx.check(); err == nil {
		t.Error("a scale with times and no over passed the check")
	}
}

// In the committed index, every authors' line taken from a column is
// named as that column: an off-by-one pick of a column would draw
// another line's published values beside ours, and the up-to-date test
// alone would not see it.
func TestChartColumnsAreTheLinesNamed(t *testing.T) {
	idx, err := LoadIndex(filepath.Join("..", "..", IndexPath))
	if err != nil {
		t.Fatal(err)
	}
	charts := 0
	for _, e := range idx.Entries {
		if e.Chart == nil {
			continue
		}
		charts++
		src, ok := idx.Entry(chartSource(&e))
		if !ok {
			t.Fatalf("%s: no entry %s", e.ID, chartSource(&e))
		}
		for _, p := range e.Chart.Panels {
			for _, l := range p.Lines {
				if l.Authors == nil || l.Authors.Column == 0 {
					continue
				}
				if c := l.Authors.Column; c >= len(src.Authors.Columns) || src.Authors.Columns[c] != l.Name {
					t.Errorf("%s: line %q draws the authors' column %d of %s", e.ID, l.Name, c, src.ID)
				}
			}
		}
	}
	if charts < 17 {
		t.Errorf("%d charts in the index, want the 17 figures", charts)
	}
}
