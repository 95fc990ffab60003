package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writeChart draws the latency, convoy and throughput results on one page,
// two panels a row, to a .png or .svg file.
func writeChart(path string, rows []row) error {
	var panels []*plot.Plot
	for _, build := range []func([]row) (*plot.Plot, error){procsRatioPanel, procsServerPanel, uncontendedPanel, convoyRatioPanel, convoyWaitPanel, keysParallelPanel} {
		p, err := build(rows)
		if err != nil {
			return err
		}
		if p != nil {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return errors.New("no uncontended, convoy, convoy-procs or keys-parallel results to draw")
	}
	cols := min(len(panels), 2)
	grid := make([][]*plot.Plot, (len(panels)+cols-1)/cols)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		copy(grid[i], panels[i*cols:])
	}
	w, h := vg.Length(cols)*14*vg.Centimeter, vg.Length(len(grid))*10*vg.Centimeter
	var canvas interface {
		vg.CanvasSizer
		vg.CanvasWriterTo
	}
	if filepath.Ext(path) == ".svg" {
		canvas = vgsvg.New(w, h)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(grid), Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2}
	canvases := plot.Align(grid, tiles, dc)
	for i, r := range grid {
		for j, p := range r {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func rowsOf(rows []row, match func(row) bool) []row {
	var out []row
	for _, r := range rows {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

func label(r row) string {
	if r.Reference {
		return r.Lib + " (ref)"
	}
	return r.Lib
}

// barPanel draws one bar per row.
func barPanel(title, ylabel string, rows []row, value func(row) float64) (*plot.Plot, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = title, ylabel
	vs := make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		vs[i], names[i] = value(r), label(r)
	}
	bars, err := plotter.NewBarChart(vs, vg.Points(36))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars, plotter.NewGrid())
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(rows))-0.5 // whole bars at the ends
	p.Y.Max *= 1.1                                  // room above the tallest bar
	return p, nil
}

// uncontendedPanel draws the uncontended p50 of the Redis subjects: the
// etcd ones (with -etcd) take milliseconds, and on its linear scale would
// flatten the rest to nothing; they are in the tables.
func uncontendedPanel(rows []row) (*plot.Plot, error) {
	return barPanel("uncontended acquire + release, p50", "µs",
		rowsOf(rows, func(r row) bool {
			return r.Scenario == "uncontended" && !needsEtcd(r.Lib) && r.Lib != etcdPutName
		}),
		func(r row) float64 { return float64(r.P50) / float64(time.Microsecond) })
}

func keysParallelPanel(rows []row) (*plot.Plot, error) {
	return barPanel(fmt.Sprintf("keys-parallel: %d goroutines, distinct keys", keysParallelWorkers), "thousand ops/s",
		rowsOf(rows, func(r row) bool { return r.Scenario == "keys-parallel" }),
		func(r row) float64 { return r.OpsPerS / 1000 })
}

func convoyRatioPanel(rows []row) (*plot.Plot, error) {
	return linePanel(rows, convoySize, "convoy makespan ÷ ideal (log)", "× ideal", func(r row) float64 { return r.Ratio })
}

func convoyWaitPanel(rows []row) (*plot.Plot, error) {
	return linePanel(rows, convoySize, "convoy wait p99 (log)", "ms", func(r row) float64 {
		return float64(r.P99) / float64(time.Millisecond)
	})
}

func procsRatioPanel(rows []row) (*plot.Plot, error) {
	return linePanel(rows, procsAxis, "convoy-procs makespan ÷ ideal (log)", "× ideal", func(r row) float64 { return r.Ratio })
}

func procsServerPanel(rows []row) (*plot.Plot, error) {
	return linePanel(rows, procsAxis, "convoy-procs server time per acquisition (log)", "µs", func(r row) float64 {
		if r.ServerUsecPerAcq == nil {
			return 0
		}
		return *r.ServerUsecPerAcq
	})
}

// xAxis places a row on a line panel's x axis: its value and label, and
// whether the row belongs to the panel at all.
type xAxis struct {
	title string
	of    func(r row) (x float64, label string, ok bool)
}

// convoySize is the contenders of convoy-N.
var convoySize = xAxis{"contenders (log)", func(r row) (float64, string, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(r.Scenario, "convoy-"))
	return float64(n), strconv.Itoa(n), err == nil && strings.HasPrefix(r.Scenario, "convoy-")
}}

// procsAxis is the worker processes of convoy-procs.
var procsAxis = xAxis{"processes (log)", func(r row) (float64, string, bool) {
	return float64(r.Procs), strconv.Itoa(r.Procs), r.Scenario == "convoy-procs" && !r.Cold
}}

// linePanel draws one line per library across x, on log scales: the polling
// libraries are an order of magnitude off the others.
func linePanel(rows []row, x xAxis, title, ylabel string, value func(row) float64) (*plot.Plot, error) {
	convoys := rowsOf(rows, func(r row) bool { _, _, ok := x.of(r); return ok })
	if len(convoys) == 0 {
		return nil, nil
	}
	var libs []string
	for _, r := range convoys {
		if !slices.Contains(libs, r.Lib) {
			libs = append(libs, r.Lib)
		}
	}
	p := plot.New()
	p.Title.Text, p.Y.Label.Text, p.X.Label.Text = title, ylabel, x.title
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = ticksAt(convoys, x), plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	drawn := false
	for i, lib := range libs {
		var xys plotter.XYs
		for _, r := range convoys {
			if v, _, _ := x.of(r); r.Lib == lib && v > 0 && value(r) > 0 {
				xys = append(xys, plotter.XY{X: v, Y: value(r)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(lib, line, points)
		drawn = true
	}
	if !drawn {
		return nil, nil
	}
	// Pad the ranges (a log axis cannot take the ±1 that plot gives an empty
	// one), with room at the top for the legend.
	p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
	p.Y.Min, p.Y.Max = p.Y.Min/1.5, p.Y.Max*8
	p.Add(plotter.NewGrid())
	return p, nil
}

// ticksAt marks exactly the x values that were run.
func ticksAt(rows []row, x xAxis) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for _, r := range rows {
		v, label, _ := x.of(r)
		if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Label == label }) {
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
}
