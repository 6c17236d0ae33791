package restartbench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Summary is the median and spread of a group of repeats.
type Summary struct {
	Nodes    int    `json:"nodes"`
	Profile  string `json:"profile"`
	Failure  string `json:"failure"`
	Strategy string `json:"strategy"`
	Repeats  int    `json:"repeats"`
	// Median and spread (min, max) of the time until every worker runs.
	Median   time.Duration `json:"medianNanos"`
	Min      time.Duration `json:"minNanos"`
	Max      time.Duration `json:"maxNanos"`
	Detected time.Duration `json:"medianDetectionNanos"`
	Synced   time.Duration `json:"medianSyncedNanos,omitempty"`
	// ControllerWrites is the median of the controller's writes.
	ControllerWrites int `json:"controllerWrites"`
	// Requests is the median number of requests per actor.
	Requests    map[string]int `json:"requests"`
	WatchEvents float64        `json:"watchEvents"`
}

func median[T any](xs []T, less func(a, b T) int) T {
	s := slices.Clone(xs)
	slices.SortFunc(s, less)
	return s[len(s)/2]
}

func cmpDuration(a, b time.Duration) int { return int(a - b) }

// Summarize groups results by size, profile, failure and strategy.
func Summarize(results []Result) []Summary {
	type key struct {
		n                          int
		profile, failure, strategy string
	}
	groups := map[key][]Result{}
	var order []key
	for _, r := range results {
		k := key{r.Nodes, r.Profile, r.Failure, r.Strategy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Summary
	for _, k := range order {
		rs := groups[k]
		var running, detected, synced []time.Duration
		var writesN []int
		requests := map[string][]int{}
		var watch []float64
		for _, r := range rs {
			running, detected, synced = append(running, r.WorkersRunning), append(detected, r.Detection), append(synced, r.Synced)
			writesN = append(writesN, writes(r.Requests[ActorController]))
			for actor, counts := range r.Requests {
				total := 0
				for _, v := range counts {
					total += v
				}
				requests[actor] = append(requests[actor], total)
			}
			watch = append(watch, r.WatchEvents)
		}
		s := Summary{Nodes: k.n, Profile: k.profile, Failure: k.failure, Strategy: k.strategy, Repeats: len(rs),
			Median: median(running, cmpDuration), Min: slices.Min(running), Max: slices.Max(running),
			Detected: median(detected, cmpDuration), Synced: median(synced, cmpDuration),
			ControllerWrites: median(writesN, func(a, b int) int { return a - b }),
			Requests:         map[string]int{}, WatchEvents: median(watch, func(a, b float64) int { return int(a - b) })}
		for actor, v := range requests {
			s.Requests[actor] = median(v, func(a, b int) int { return a - b })
		}
		out = append(out, s)
	}
	return out
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// Table prints the summaries, with in place as a multiple of the floor and
// the other strategies as multiples of in place.
func Table(w io.Writer, report Report) {
	floors := map[int]Floor{}
	for _, f := range report.Floors {
		floors[f.Nodes] = f
	}
	sums := Summarize(report.Results)
	inPlace := map[string]time.Duration{}
	for _, s := range sums {
		if s.Strategy == string(jobset.InPlaceRestart) {
			inPlace[fmt.Sprint(s.Nodes, s.Profile, s.Failure)] = s.Median
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tprofile\tfailure\tstrategy\trepeats\tall running (median)\tmin..max\tdetection\tvs floor\tvs in place\tcontroller writes\tagent req\tkubelet req\twatch events\t")
	for _, s := range sums {
		vsFloor, vsInPlace := "", ""
		if s.Strategy == string(jobset.InPlaceRestart) {
			if f, ok := floors[s.Nodes]; ok && f.Total > 0 {
				vsFloor = fmt.Sprintf("%.1fx", s.Median.Seconds()/f.Total.Seconds())
			}
		} else if ip := inPlace[fmt.Sprint(s.Nodes, s.Profile, s.Failure)]; ip > 0 {
			vsInPlace = fmt.Sprintf("%.1fx", s.Median.Seconds()/ip.Seconds())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s..%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.0f\t\n",
			s.Nodes, s.Profile, s.Failure, s.Strategy, s.Repeats, seconds(s.Median), seconds(s.Min), seconds(s.Max),
			seconds(s.Detected), vsFloor, vsInPlace, s.ControllerWrites, s.Requests[ActorAgents], s.Requests[ActorKubelets], s.WatchEvents)
	}
	tw.Flush()
	if len(report.Floors) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "N\tfloor\tagents' work\tkubelets' status writes\tstatus writes\t")
		cpuHeader(tw, cpuColumns)
		sort.Slice(report.Floors, func(i, j int) bool { return report.Floors[i].Nodes < report.Floors[j].Nodes })
		for _, f := range report.Floors {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t", f.Nodes, seconds(f.Total), seconds(f.Agents), seconds(f.StatusWrites), f.StatusWriteCount)
			cpuCells(tw, cpuColumns, f.CPUSeconds)
		}
		tw.Flush()
	}
}

// RequestBreakdown prints the median requests per restart by actor, verb
// and resource, for in-place restarts.
func RequestBreakdown(w io.Writer, report Report) {
	type key struct {
		n       int
		failure string
	}
	seen := map[key]bool{}
	for _, r := range report.Results {
		k := key{r.Nodes, r.Failure}
		if r.Strategy != string(jobset.InPlaceRestart) || seen[k] {
			continue
		}
		seen[k] = true
		fmt.Fprintf(w, "\nrequests of one in-place restart, N=%d, %s (profile %s):\n", r.Nodes, r.Failure, r.Profile)
		for _, actor := range []string{ActorController, ActorAgents, ActorKubelets} {
			var parts []string
			for k, v := range r.Requests[actor] {
				parts = append(parts, fmt.Sprintf("%s %d", k, v))
			}
			sort.Strings(parts)
			fmt.Fprintf(w, "  %-10s %s\n", actor, strings.Join(parts, ", "))
		}
	}
}

// cpuColumns are the processes of the CPU columns, in order; Timeline adds
// ProcessNodes for real nodes.
var cpuColumns = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", ProcessBench}

// columnsFor are the CPU columns of a report's results.
func columnsFor(results []Result) []string {
	for _, r := range results {
		if _, ok := r.CPUSeconds[ProcessNodes]; ok {
			return columnsOf(r.CPUSeconds)
		}
	}
	return cpuColumns
}

// Timeline prints every restart's progress from the failure and the CPU
// seconds each process spent on it: where the time goes.
func Timeline(w io.Writer, report Report) {
	if len(report.Results) == 0 {
		return
	}
	fmt.Fprintln(w, "\nevery restart, from the failure (in place: agents restarted, epochs reported and written, syncedEpoch), and CPU seconds by process:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "N\tprofile\tfailure\tstrategy\t#\tbusy before\texit written\tfailure seen\tdetection\tagents\treported\twritten\tsynced\trunning\t")
	columns := columnsFor(report.Results)
	cpuHeader(tw, columns)
	opt := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return seconds(d)
	}
	for _, r := range report.Results {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", r.Nodes, r.Profile, r.Failure, r.Strategy, r.Repeat,
			cores(r.LoadBefore), opt(r.ExitWritten), opt(r.FailureSeen), seconds(r.Detection), opt(r.AgentsRestarted), opt(r.EpochsReported), opt(r.EpochsWritten), opt(r.Synced), seconds(r.WorkersRunning))
		cpuCells(tw, columns, r.CPUSeconds)
	}
	tw.Flush()
}

// cores is the cores a load kept busy in all, as "1.23 cores".
func cores(load map[string]float64) string {
	if load == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f cores", cpuTotal(columnsOf(load), load))
}

// columnsOf are the CPU columns of one account.
func columnsOf(cpu map[string]float64) []string {
	if _, ok := cpu[ProcessNodes]; ok {
		return append(slices.Clone(cpuColumns), ProcessNodes)
	}
	return cpuColumns
}

// cpuHeader ends a header row with the CPU columns.
func cpuHeader(w io.Writer, columns []string) {
	for _, c := range columns {
		fmt.Fprintf(w, "%s\t", c)
	}
	fmt.Fprintln(w, "CPU total\t")
}

// cpuCells ends a row with the CPU seconds of each process and their sum.
func cpuCells(w io.Writer, columns []string, cpu map[string]float64) {
	for _, c := range columns {
		fmt.Fprintf(w, "%.1fs\t", cpu[c])
	}
	fmt.Fprintf(w, "%.1fs\t\n", cpuTotal(columns, cpu))
}

// cpuTotal sums the CPU columns' processes.
func cpuTotal(columns []string, cpu map[string]float64) float64 {
	total := 0.0
	for _, c := range columns {
		total += cpu[c]
	}
	return total
}
