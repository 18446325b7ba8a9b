// Package plot draws the figures of the experiment commands (`--plot
// FILE`): line charts of one or more panels stacked over a shared x axis,
// written as SVG or PNG by the file's extension. It is a thin layer over
// gonum.org/v1/plot, so that each command only says what its figure
// shows.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line: its points and its name in the legend.
type Series struct {
	Name string
	X, Y []float64
	// Dashed draws the line dashed, for a target or a reference.
	Dashed bool
	// Points marks each point, for lines of a few measured points.
	Points bool
	// Colour is the line's palette index plus one, so that lines of one
	// colour belong together (a measured line and its published one);
	// zero takes the series' position in its panel.
	Colour int
}

// Panel is one chart of a figure: its y axis and its lines.
type Panel struct {
	YLabel string
	Series []Series
	// LogY draws the y axis in logarithmic scale, for lines whose
	// values differ by orders of magnitude; it needs positive values.
	LogY bool
	// Bands shades intervals of x behind the lines (faults, say), each
	// band's name once in the legend.
	Bands []Band
	// Rows, if set, make the panel a timeline instead: one row per name,
	// top to bottom, named on the y axis, and a bar for each of Spans.
	Rows  []string
	Spans []Span
}

// Span is a bar of a timeline panel: an interval of x in the row of
// Panel.Rows at index Row, coloured by Colour (an index into the
// palette: spans of one colour belong together).
type Span struct {
	Row, Colour int
	From, To    float64
}

// Band is an interval of x shaded in a panel.
type Band struct {
	Name     string
	From, To float64
}

// Figure is one or more panels stacked top to bottom over one x axis.
type Figure struct {
	Title  string
	XLabel string
	Panels []Panel
}

// formats maps a file extension to the canvas format that writes it.
var formats = map[string]string{".svg": "svg", ".png": "png"}

// CheckFile says whether file names a format Save can write, so that a
// command can refuse a bad --plot before it runs.
func CheckFile(file string) error {
	if _, ok := formats[strings.ToLower(filepath.Ext(file))]; !ok {
		return fmt.Errorf("%q: the file name must end in .svg or .png", file)
	}
	return nil
}

// addBands shades the panel's bands, from 0 to the top of its lines,
// one colour per band name.
func addBands(p *gonum.Plot, panel Panel) error {
	top := 1.0
	for _, s := range panel.Series {
		for _, y := range s.Y {
			top = max(top, y)
		}
	}
	colours := map[string]int{}
	for _, b := range panel.Bands {
		i, seen := colours[b.Name]
		if !seen {
			i = len(colours)
			colours[b.Name] = i
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: b.From, Y: 0}, {X: b.To, Y: 0}, {X: b.To, Y: top}, {X: b.From, Y: top}})
		if err != nil {
			return fmt.Errorf("plot: band %q: %w", b.Name, err)
		}
		c := plotutil.Color(i + 3)
		r, g, bl, _ := c.RGBA()
		poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: 60}
		poly.LineStyle.Width = 0
		p.Add(poly)
		if !seen {
			p.Legend.Add(b.Name, poly)
		}
	}
	return nil
}

// addSpans draws a timeline panel: row r of n at y = n-r (the first
// row on top), each span a bar 0.7 high, the rows named on the y axis.
func addSpans(p *gonum.Plot, panel Panel) error {
	n := len(panel.Rows)
	var ticks []gonum.Tick
	for r, name := range panel.Rows {
		ticks = append(ticks, gonum.Tick{Value: float64(n - r), Label: name})
	}
	p.Y.Tick.Marker = gonum.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = 0.4, float64(n)+0.6
	for _, sp := range panel.Spans {
		if sp.Row < 0 || sp.Row >= n {
			return fmt.Errorf("plot: span in row %d of %d", sp.Row, n)
		}
		y := float64(n - sp.Row)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: sp.From, Y: y - 0.35}, {X: sp.To, Y: y - 0.35}, {X: sp.To, Y: y + 0.35}, {X: sp.From, Y: y + 0.35}})
		if err != nil {
			return fmt.Errorf("plot: span: %w", err)
		}
		poly.Color = plotutil.Color(sp.Colour)
		poly.LineStyle.Width = 0
		p.Add(poly)
	}
	return nil
}

// Size of a panel.
const (
	width       = 16 * vg.Centimeter
	panelHeight = 9 * vg.Centimeter
)

// Save draws f and writes it to file, as SVG or PNG by its extension.
func Save(file string, f Figure) error {
	if err := CheckFile(file); err != nil {
		return err
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := Write(out, formats[strings.ToLower(filepath.Ext(file))], f); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Write draws f and writes it to w in format, "svg" or "png".
func Write(w io.Writer, format string, f Figure) error {
	if format != "svg" && format != "png" {
		return fmt.Errorf("plot: format %q: svg or png", format)
	}
	if len(f.Panels) == 0 {
		return errors.New("plot: a figure needs a panel")
	}
	plots := make([][]*gonum.Plot, len(f.Panels))
	for i, panel := range f.Panels {
		p := gonum.New()
		if i == 0 {
			p.Title.Text = f.Title
		}
		if i == len(f.Panels)-1 {
			p.X.Label.Text = f.XLabel
		}
		p.Y.Label.Text = panel.YLabel
		p.Y.Min = 0
		if len(panel.Rows) > 0 {
			if err := addSpans(p, panel); err != nil {
				return err
			}
			plots[i] = []*gonum.Plot{p}
			continue
		}
		p.Add(plotter.NewGrid())
		if err := addBands(p, panel); err != nil {
			return err
		}
		p.Legend.Top = true
		p.Legend.Left = true
		for j, s := range panel.Series {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("plot: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
			}
			xys := make(plotter.XYs, len(s.X))
			for k := range s.X {
				xys[k] = plotter.XY{X: s.X[k], Y: s.Y[k]}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("plot: series %q: %w", s.Name, err)
			}
			colour := j
			if s.Colour > 0 {
				colour = s.Colour - 1
			}
			l.Color = plotutil.Color(colour)
			l.Width = vg.Points(1.2)
			if s.Dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			if s.Points {
				pts, err := plotter.NewScatter(xys)
				if err != nil {
					return fmt.Errorf("plot: series %q: %w", s.Name, err)
				}
				pts.Color = l.Color
				pts.Shape = draw.CircleGlyph{}
				pts.Radius = vg.Points(2)
				p.Add(pts)
				p.Legend.Add(s.Name, l, pts)
			} else {
				p.Legend.Add(s.Name, l)
			}
		}
		if panel.LogY {
			if err := logY(p, panel); err != nil {
				return err
			}
		}
		plots[i] = []*gonum.Plot{p}
	}
	// The panels share the x axis: each spans all the panels' x values.
	xmin, xmax := plots[0][0].X.Min, plots[0][0].X.Max
	for _, p := range plots {
		xmin, xmax = min(xmin, p[0].X.Min), max(xmax, p[0].X.Max)
	}
	for _, p := range plots {
		p[0].X.Min, p[0].X.Max = xmin, xmax
	}
	c, err := draw.NewFormattedCanvas(width, panelHeight*vg.Length(len(f.Panels)), format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(f.Panels), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadY: vg.Millimeter * 4}
	canvases := gonum.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err = c.WriteTo(w)
	return err
}

// logY puts p's y axis in logarithmic scale from the panel's least
// value to its greatest.
func logY(p *gonum.Plot, panel Panel) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range panel.Series {
		for _, y := range s.Y {
			if y <= 0 {
				return fmt.Errorf("plot: series %q has %g on a logarithmic axis", s.Name, y)
			}
			lo, hi = min(lo, y), max(hi, y)
		}
	}
	if math.IsInf(lo, 1) {
		return errors.New("plot: a logarithmic axis needs a value")
	}
	p.Y.Scale = gonum.LogScale{}
	p.Y.Tick.Marker = gonum.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	return nil
}
