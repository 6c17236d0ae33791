package restartbench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// strategyOrder is the order of the strategies in charts, each with the
// same color everywhere.
var strategyOrder = []string{string(InPlace), string(InPlaceProcess), string(InPlaceProcessPodReports), string(InPlaceInProcess), string(Recreate), string(BlockingRecreate)}

// Charts writes the report's charts as SVG into dir and returns their
// paths:
//
//   - per size, node profile and failure, the workers running from the
//     failure until all run again, one line per strategy (its median
//     restart);
//   - per node profile and failure, the control plane's CPU (the API server
//     and etcd) per Pod against N, one line per strategy and per floor.
func Charts(dir string, report Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	type cell struct {
		n                int
		profile, failure string
	}
	byCell := map[cell]map[string][]Result{}
	var cells []cell
	for _, r := range report.Results {
		c := cell{r.Nodes, r.Profile, r.Failure}
		if byCell[c] == nil {
			byCell[c] = map[string][]Result{}
			cells = append(cells, c)
		}
		byCell[c][r.Strategy] = append(byCell[c][r.Strategy], r)
	}
	for _, c := range cells {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Workers running after a %s, N = %d (%s nodes, %s control plane)", failureName(c.failure), c.n, c.profile, report.ControlPlane)
		p.X.Label.Text = "seconds from the failure"
		p.Y.Label.Text = "workers running"
		p.Y.Min, p.Y.Max = 0, float64(c.n)*1.05
		p.Legend.Top, p.Legend.Left = false, false
		drawn := false
		for i, strategy := range strategyOrder {
			r, ok := medianRestart(byCell[c][strategy])
			if !ok || len(r.Running) == 0 {
				continue
			}
			xys := make(plotter.XYs, 0, len(r.Running)+1)
			for _, pt := range r.Running {
				xys = append(xys, plotter.XY{X: pt.At.Seconds(), Y: float64(pt.Workers)})
			}
			// The line ends where the last worker runs again.
			xys = append(xys, plotter.XY{X: r.WorkersRunning.Seconds(), Y: float64(c.n)})
			line, err := plotter.NewLine(xys)
			if err != nil {
				return paths, err
			}
			line.StepStyle = plotter.PostStep
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s: %.1f s", strategy, r.WorkersRunning.Seconds()), line)
			drawn = true
		}
		if !drawn {
			continue
		}
		p.Add(plotter.NewGrid())
		path := filepath.Join(dir, fmt.Sprintf("restart-running-%d-%s-%s.svg", c.n, c.profile, c.failure))
		if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}

	cpuPaths, err := cpuCharts(dir, report)
	return append(paths, cpuPaths...), err
}

// cpuCharts draws the control plane's CPU per Pod against N.
func cpuCharts(dir string, report Report) ([]string, error) {
	sums := Summarize(report.Results)
	type cell struct{ profile, failure string }
	var cells []cell
	for _, s := range sums {
		if c := (cell{s.Profile, s.Failure}); !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
	}
	var paths []string
	for _, c := range cells {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Control-plane CPU per Pod and restart, after a %s (%s nodes)", failureName(c.failure), c.profile)
		p.X.Label.Text = "N (Pods, one per node)"
		p.Y.Label.Text = "kube-apiserver + etcd CPU-ms per Pod"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		sizes := 0
		add := func(i int, name string, floor bool, xys plotter.XYs) error {
			if len(xys) == 0 {
				return nil
			}
			slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			if floor {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(line, points)
			p.Legend.Add(name, line, points)
			sizes = max(sizes, len(xys))
			return nil
		}
		for i, strategy := range strategyOrder {
			var xys plotter.XYs
			for _, s := range sums {
				if s.Strategy == strategy && s.Profile == c.profile && s.Failure == c.failure {
					xys = append(xys, plotter.XY{X: float64(s.Nodes), Y: 1000 * s.ControlPlaneCPU / float64(s.Nodes)})
				}
			}
			if err := add(i, strategy, false, xys); err != nil {
				return paths, err
			}
		}
		for i, kind := range FloorKinds {
			var floor plotter.XYs
			for _, f := range report.Floors {
				if f.Kind == kind {
					floor = append(floor, plotter.XY{X: float64(f.Nodes), Y: 1000 * controlPlaneCPU(f.CPUSeconds) / float64(f.Nodes)})
				}
			}
			name := "floor"
			if kind != FloorNeeded {
				name = kind + " floor"
			}
			if err := add(len(strategyOrder)+i, name, true, floor); err != nil {
				return paths, err
			}
		}
		// One size makes no line against N.
		if sizes < 2 {
			continue
		}
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		path := filepath.Join(dir, fmt.Sprintf("restart-cpu-%s-%s.svg", c.profile, c.failure))
		if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// medianRestart is the restart of median time among repeats.
func medianRestart(rs []Result) (Result, bool) {
	if len(rs) == 0 {
		return Result{}, false
	}
	return median(rs, func(a, b Result) int { return cmp.Compare(a.WorkersRunning, b.WorkersRunning) }), true
}

func failureName(failure string) string {
	switch failure {
	case FailureExit:
		return "worker exit"
	case FailureDelete:
		return "Pod deletion"
	}
	return strings.ToLower(failure)
}
