package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeChart plots server load over time, one line per strategy, the
// outage shaded, as SVG and PNG in dir. It returns the two paths.
func writeChart(dir string, sc scenario, rs []result, mode string) ([]string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("retrystorm %s (%s): requests reaching the server per 100 ms", sc.name, mode)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests per 100 ms"
	p.Title.Padding = vg.Points(10)
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = -vg.Points(5)

	top := 1
	for _, r := range rs {
		for _, v := range r.load {
			top = max(top, v)
		}
	}
	if sc.outage > 0 {
		x0, x1 := sc.outageAt.Seconds(), sc.recovery().Seconds()
		shade, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: float64(top)}, {X: x0, Y: float64(top)}})
		if err != nil {
			return nil, err
		}
		shade.Color = color.RGBA{R: 230, G: 230, B: 230, A: 255}
		shade.LineStyle.Width = 0
		p.Add(shade)
		p.Legend.Add("outage", shade)
	}
	p.Y.Min, p.Y.Max = 0, 1.4*float64(top) // headroom for the legend
	for i, r := range rs {
		xys := make(plotter.XYs, len(r.load))
		for b, v := range r.load {
			xys[b] = plotter.XY{X: float64(b) * binWidth.Seconds(), Y: float64(v)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.2)
		p.Add(line)
		p.Legend.Add(r.strategy, line)
	}
	var paths []string
	for _, ext := range []string{"svg", "png"} {
		path := filepath.Join(dir, fmt.Sprintf("retrystorm-%s-%s.%s", sc.name, mode, ext))
		if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
			return nil, fmt.Errorf("write chart: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
