package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writeReproductionCharts draws one chart per reproduced figure, ours as
// lines over the published values as points, as PNG and SVG in dir.
func writeReproductionCharts(dir string, rep reproduction) ([]string, error) {
	var paths []string
	for _, c := range []struct {
		name string
		draw func() (*plot.Plot, error)
	}{
		{"reproduce-aws-contention", func() (*plot.Plot, error) { return awsChart(rep) }},
		{"reproduce-brooker-amplification", func() (*plot.Plot, error) { return brookerChart(rep) }},
		{"reproduce-sre-retry-growth", func() (*plot.Plot, error) { return sreChart(rep) }},
		{"reproduce-hotos-metastable", func() (*plot.Plot, error) { return hotosChart(rep) }},
		{"reproduce-sre-throttling", func() (*plot.Plot, error) { return throttleChart(rep) }},
		{"reproduce-tail-at-scale", func() (*plot.Plot, error) { return tailChart(rep) }},
	} {
		p, err := c.draw()
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", c.name, err)
		}
		for _, ext := range []string{"png", "svg"} {
			path := filepath.Join(dir, c.name+"."+ext)
			if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
				return nil, fmt.Errorf("write chart: %w", err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Title.Padding = vg.Points(8)
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}

// oursAndTheirs adds a series: ours as a line, theirs as points, one color.
func oursAndTheirs(p *plot.Plot, i int, name string, ours, theirs plotter.XYs) error {
	line, err := plotter.NewLine(ours)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(i)
	line.Width = vg.Points(1.5)
	p.Add(line)
	p.Legend.Add(name+" (ours)", line)
	if theirs != nil {
		pts, err := plotter.NewScatter(theirs)
		if err != nil {
			return err
		}
		pts.Color = plotutil.Color(i)
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(3.5)
		p.Add(pts)
		p.Legend.Add(name+" (published)", pts)
	}
	return nil
}

func awsChart(rep reproduction) (*plot.Plot, error) {
	p := newPlot("AWS \"Exponential Backoff and Jitter\": calls to finish N contending writers", "clients (N)", "calls (mean)")
	ns := []float64{50, 100, 200}
	for i, s := range awsStrategies {
		ours, theirs := make(plotter.XYs, 3), make(plotter.XYs, 3)
		for j, n := range ns {
			ours[j] = plotter.XY{X: n, Y: rep.awsCalls[s.name][j]}
			theirs[j] = plotter.XY{X: n, Y: awsPublished[fmt.Sprintf("calls/%d", int(n))][i]}
		}
		if err := oursAndTheirs(p, i, s.name, ours, theirs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func brookerChart(rep reproduction) (*plot.Plot, error) {
	p := newPlot("Brooker 2022: load (attempts per first try) by failure rate", "failure rate p", "load")
	published := map[string][]float64{
		"3 retries": {1.114, 1.88, 4.00}, "3 retries, budget for his token bucket": {1.103, 1.14, 1.142},
		"3 retries, breaker on retries": {1.029, 1.00, 1.00},
	}
	for i, name := range []string{"3 retries", "3 retries, budget for his token bucket", "3 retries, breaker on retries"} {
		ours, theirs := make(plotter.XYs, len(rep.brookerP)), make(plotter.XYs, len(rep.brookerP))
		for j, pr := range rep.brookerP {
			ours[j] = plotter.XY{X: pr, Y: rep.brookerAt[name][j]}
			theirs[j] = plotter.XY{X: pr, Y: published[name][j]}
		}
		if err := oursAndTheirs(p, i, name, ours, theirs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func sreChart(rep reproduction) (*plot.Plot, error) {
	p := newPlot("SRE book ch. 22: 10,100/s into 10,000/s, rejections retried after 1 s", "seconds", "retries per second")
	ours := make(plotter.XYs, len(rep.growth))
	theirs := make(plotter.XYs, len(rep.growth))
	for s, v := range rep.growth {
		ours[s] = plotter.XY{X: float64(s), Y: v}
		theirs[s] = plotter.XY{X: float64(s), Y: 100*float64(max(0, s-1)) + 100*float64(min(1, s))}
	}
	if err := oursAndTheirs(p, 0, "retries", ours, theirs); err != nil {
		return nil, err
	}
	return p, nil
}

func hotosChart(rep reproduction) (*plot.Plot, error) {
	sc := hotosScenario()
	p := newPlot("HotOS 2021: 280/s into 300/s, one retry per 1 s timeout, 5 s slowdown at 10 s", "seconds", "queries per second reaching the database")
	for i, r := range rep.hotos {
		var xys plotter.XYs
		bins := int(1e9 / binWidth)
		for s := 0; (s+1)*bins <= len(r.load); s++ {
			n := 0
			for _, v := range r.load[s*bins : (s+1)*bins] {
				n += v
			}
			xys = append(xys, plotter.XY{X: float64(s), Y: float64(n)})
		}
		if err := oursAndTheirs(p, i, r.strategy, xys, nil); err != nil {
			return nil, err
		}
	}
	for _, ref := range []struct {
		y    float64
		name string
	}{{560, "published: ~2x (560/s), sustained"}, {sc.rate, "normal: 280/s"}} {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: ref.y}, {X: sc.runFor.Seconds(), Y: ref.y}})
		if err != nil {
			return nil, err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Gray{Y: 110}
		p.Add(l)
		p.Legend.Add(ref.name, l)
	}
	p.Y.Min, p.Y.Max = 0, 750
	return p, nil
}

func throttleChart(rep reproduction) (*plot.Plot, error) {
	p := newPlot("SRE book ch. 21: 1,000/s offered to a backend taking 100/s, client-side throttling (K = 2)", "seconds", "requests sent per accepted, per 30 s")
	ours := make(plotter.XYs, len(rep.throttle))
	theirs := make(plotter.XYs, len(rep.throttle))
	for i, v := range rep.throttle {
		ours[i] = plotter.XY{X: float64(30 * (i + 1)), Y: v}
		theirs[i] = plotter.XY{X: float64(30 * (i + 1)), Y: 2}
	}
	if err := oursAndTheirs(p, 0, "sent per accepted", ours, theirs); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, 3
	return p, nil
}

func tailChart(rep reproduction) (*plot.Plot, error) {
	p := newPlot("The Tail at Scale: reading 1,000 keys over 100 servers, with and without a 10 ms hedge", "percentile of reads", "read latency (ms)")
	qs := []float64{50, 90, 99, 99.9}
	at := func(ds []time.Duration) plotter.XYs {
		xy := make(plotter.XYs, len(qs))
		for i, q := range qs {
			d := ds[min(len(ds)-1, int(math.Ceil(q/100*float64(len(ds))))-1)]
			xy[i] = plotter.XY{X: float64(i), Y: float64(d) / float64(time.Millisecond)}
		}
		return xy
	}
	p.NominalX("p50", "p90", "p99", "p99.9")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if err := oursAndTheirs(p, 0, "no hedging", at(rep.tailPlain), plotter.XYs{{X: 3, Y: 1800}}); err != nil {
		return nil, err
	}
	if err := oursAndTheirs(p, 1, "hedged after 10 ms", at(rep.tailHedge), plotter.XYs{{X: 3, Y: 74}}); err != nil {
		return nil, err
	}
	return p, nil
}
