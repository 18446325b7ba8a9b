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
