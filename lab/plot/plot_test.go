package plot

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func figure() Figure {
	return Figure{
		Title: "throughput and latency", XLabel: "seconds",
		Panels: []Panel{
			{YLabel: "requests/s", Series: []Series{
				{Name: "achieved", X: []float64{0, 1, 2}, Y: []float64{10, 20, 30}},
				{Name: "target", X: []float64{0, 1, 2}, Y: []float64{10, 20, 30}, Dashed: true},
			}},
			{YLabel: "ms", Series: []Series{{Name: "p99", X: []float64{0, 1, 2}, Y: []float64{1, 2, 1}}}},
		},
	}
}

func TestSaveSVGAndPNG(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "f.svg")
	if err := Save(svg, figure()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "throughput and latency", "requests/s", "achieved", "target", "p99", "seconds"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	pngFile := filepath.Join(dir, "f.PNG")
	if err := Save(pngFile, figure()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dy() <= b.Dx() {
		t.Errorf("two stacked panels should be taller than wide: %v", b)
	}
}

func TestBadInput(t *testing.T) {
	if err := CheckFile("chart.pdf"); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("CheckFile(.pdf) = %v", err)
	}
	if err := Save(filepath.Join(t.TempDir(), "x.svg"), Figure{}); err == nil {
		t.Error("a figure without panels saved")
	}
	bad := figure()
	bad.Panels[1].Series[0].Y = bad.Panels[1].Series[0].Y[:1]
	if err := Save(filepath.Join(t.TempDir(), "x.svg"), bad); err == nil {
		t.Error("a series with fewer y than x values saved")
	}
}

// A panel's bands are drawn: the figure with one is larger than without.
func TestBandsAreDrawn(t *testing.T) {
	dir := t.TempDir()
	f := Figure{Title: "t", XLabel: "s", Panels: []Panel{{YLabel: "ops/s", Series: []Series{{Name: "ops", X: []float64{0, 1, 2, 3}, Y: []float64{5, 6, 0, 5}}}}}}
	plain := filepath.Join(dir, "plain.svg")
	if err := Save(plain, f); err != nil {
		t.Fatal(err)
	}
	f.Panels[0].Bands = []Band{{Name: "kill", From: 1, To: 2}, {Name: "kill", From: 2.5, To: 3}}
	banded := filepath.Join(dir, "banded.svg")
	if err := Save(banded, f); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(plain)
	b, _ := os.ReadFile(banded)
	if strings.Count(string(b), "kill") != 1 || len(b) <= len(a) {
		t.Fatalf("banded figure: %d bytes (plain %d), %d legend entries for the band", len(b), len(a), strings.Count(string(b), "kill"))
	}
}

// A timeline panel names its rows on the y axis and draws a bar per
// span; a span outside the rows is refused.
func TestTimelinePanel(t *testing.T) {
	dir := t.TempDir()
	ops := Panel{YLabel: "ops/s", Series: []Series{{Name: "ops", X: []float64{0, 1, 2, 3}, Y: []float64{5, 6, 0, 5}}}}
	lanes := Panel{YLabel: "faults", Rows: []string{"kill-postgres", "partition-kafka"},
		Spans: []Span{{Row: 0, From: 1, To: 2}, {Row: 1, Colour: 1, From: 1.5, To: 3}}}
	file := filepath.Join(dir, "timeline.svg")
	if err := Save(file, Figure{Title: "t", XLabel: "s", Panels: []Panel{ops, lanes}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	for _, name := range lanes.Rows {
		if !strings.Contains(string(b), name) {
			t.Errorf("row %q not named", name)
		}
	}
	lanes.Spans = append(lanes.Spans, Span{Row: 2, From: 0, To: 1})
	if err := Save(file, Figure{Panels: []Panel{lanes}}); err == nil {
		t.Error("a span outside the rows saved")
	}
}
