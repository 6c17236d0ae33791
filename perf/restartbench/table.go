package restartbench

import (
	"cmp"
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
	// ControllerPeriodic is the median of the controller's requests that
	// come at a rate, whatever the restart does (periodic): part of
	// Requests[ActorController], more the longer the restart lasts.
	ControllerPeriodic int `json:"controllerPeriodicRequests"`
	// Requests is the median number of requests per actor, and
	// CriticalRequests of those sent before the group's release.
	Requests         map[string]int `json:"requests"`
	CriticalRequests map[string]int `json:"criticalPathRequests"`
	WatchEvents      float64        `json:"watchEvents"`
	// Rejected is the median number of requests API Priority and Fairness
	// turned away.
	Rejected float64 `json:"rejectedRequests"`
	// Handshakes is the median number of connections the agents opened.
	Handshakes int `json:"agentHandshakes"`
	// ControlPlaneCPU is the median CPU-seconds of kube-apiserver and etcd
	// (ControlPlaneProcesses), with their min and max.
	ControlPlaneCPU    float64 `json:"controlPlaneCPUSeconds"`
	ControlPlaneCPUMin float64 `json:"controlPlaneCPUSecondsMin"`
	ControlPlaneCPUMax float64 `json:"controlPlaneCPUSecondsMax"`
}

// ControlPlaneProcesses are the processes whose CPU a real cluster pays
// centrally for every restart, whatever runs the nodes: the API server and
// its store. The controller manager and the scheduler are counted apart:
// an in-place restart does not involve them.
var ControlPlaneProcesses = []string{"kube-apiserver", "etcd"}

// controlPlaneCPU is the CPU-seconds of ControlPlaneProcesses in an
// account.
func controlPlaneCPU(cpu map[string]float64) float64 { return cpuTotal(ControlPlaneProcesses, cpu) }

// sum adds a map's values: requests by verb, rejections by priority
// level.
func sum[V int | float64](m map[string]V) V {
	var n V
	for _, v := range m {
		n += v
	}
	return n
}

// total sums requests over actors and verbs.
func total(requests map[string]map[string]int) int {
	n := 0
	for _, counts := range requests {
		n += sum(counts)
	}
	return n
}

func median[T any](xs []T, less func(a, b T) int) T {
	s := slices.Clone(xs)
	slices.SortFunc(s, less)
	return s[len(s)/2]
}

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
		var writesN, periodicN []int
		requests, critical := map[string][]int{}, map[string][]int{}
		var watch, rejected, cp []float64
		var handshakes []int
		for _, r := range rs {
			rejected, cp = append(rejected, sum(r.Rejected)), append(cp, controlPlaneCPU(r.CPUSeconds))
			handshakes = append(handshakes, r.Handshakes[ActorAgents])
			running, detected, synced = append(running, r.WorkersRunning), append(detected, r.Detection), append(synced, r.Synced)
			writesN = append(writesN, writes(r.Requests[ActorController]))
			periodicN = append(periodicN, periodic(r.Requests[ActorController]))
			for actor, counts := range r.Requests {
				requests[actor] = append(requests[actor], sum(counts))
			}
			for actor, counts := range r.CriticalRequests {
				critical[actor] = append(critical[actor], sum(counts))
			}
			watch = append(watch, r.WatchEvents)
		}
		s := Summary{Nodes: k.n, Profile: k.profile, Failure: k.failure, Strategy: k.strategy, Repeats: len(rs),
			Median: median(running, cmp.Compare), Min: slices.Min(running), Max: slices.Max(running),
			Detected: median(detected, cmp.Compare), Synced: median(synced, cmp.Compare),
			ControllerWrites: median(writesN, cmp.Compare), ControllerPeriodic: median(periodicN, cmp.Compare),
			Requests: map[string]int{}, CriticalRequests: map[string]int{}, WatchEvents: median(watch, cmp.Compare),
			Rejected: median(rejected, cmp.Compare), Handshakes: median(handshakes, cmp.Compare),
			ControlPlaneCPU: median(cp, cmp.Compare), ControlPlaneCPUMin: slices.Min(cp), ControlPlaneCPUMax: slices.Max(cp)}
		for actor, v := range requests {
			s.Requests[actor] = median(v, cmp.Compare)
		}
		for actor, v := range critical {
			s.CriticalRequests[actor] = median(v, cmp.Compare)
		}
		out = append(out, s)
	}
	return out
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// orDash is seconds(d), or "-" for a moment not measured.
func orDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return seconds(d)
}

// Table prints the summaries: the time until every worker runs again, with
// in place as a multiple of the floor and the other strategies as multiples
// of in place; then what the control plane paid, per Pod (the CPU of the
// API server and etcd, requests by actor, refusals, the agents' TLS
// handshakes, watch events); then the floors.
func Table(w io.Writer, report Report) {
	type floorKey struct {
		nodes int
		kind  string
	}
	floors := map[floorKey]Floor{}
	for _, f := range report.Floors {
		floors[floorKey{f.Nodes, f.Kind}] = f
	}
	sums := Summarize(report.Results)
	inPlace := map[string]Summary{}
	for _, s := range sums {
		if s.Strategy == string(jobset.InPlaceRestart) {
			inPlace[fmt.Sprint(s.Nodes, s.Profile, s.Failure)] = s
		}
	}
	if report.ControlPlane != "" {
		fmt.Fprintf(w, "control-plane profile %s, the manager's own priority level %v\n", report.ControlPlane, report.ManagerFlowSchema)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tprofile\tfailure\tstrategy\trepeats\tall running (median)\tmin..max\tdetection\tvs floor\tvs kubelet floor\tvs in place\tAPI server+etcd CPU\tmin..max\tvs floor\tvs kubelet floor\tvs in place\t")
	for _, s := range sums {
		var vsFloor, cpuVsFloor [2]string
		vsInPlace, cpuVsInPlace := "", ""
		if s.Strategy == string(jobset.InPlaceRestart) {
			for i, kind := range FloorKinds {
				if f, ok := floors[floorKey{s.Nodes, kind}]; ok && f.Total > 0 {
					vsFloor[i] = ratio(s.Median.Seconds(), f.Total.Seconds())
					cpuVsFloor[i] = ratio(s.ControlPlaneCPU, controlPlaneCPU(f.CPUSeconds))
				}
			}
		} else if ip, ok := inPlace[fmt.Sprint(s.Nodes, s.Profile, s.Failure)]; ok {
			vsInPlace = ratio(s.Median.Seconds(), ip.Median.Seconds())
			cpuVsInPlace = ratio(s.ControlPlaneCPU, ip.ControlPlaneCPU)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s..%s\t%s\t%s\t%s\t%s\t%.1fs\t%.1f..%.1f\t%s\t%s\t%s\t\n",
			s.Nodes, s.Profile, s.Failure, s.Strategy, s.Repeats, seconds(s.Median), seconds(s.Min), seconds(s.Max),
			seconds(s.Detected), vsFloor[0], vsFloor[1], vsInPlace, s.ControlPlaneCPU, s.ControlPlaneCPUMin, s.ControlPlaneCPUMax, cpuVsFloor[0], cpuVsFloor[1], cpuVsInPlace)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nper Pod (medians): API server + etcd CPU, requests by actor (critical path, before the group's release / all), of the controller's those that come at a rate whatever the restart does (periodic: its watches opened again, the upstream JobSet check's reads), refusals, the agents' TLS handshakes (- where not counted: real nodes), watch events")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tprofile\tfailure\tstrategy\tAPI server+etcd CPU ms/Pod\tcontroller req\tperiodic (of all)\tagent req/Pod\tkubelet req/Pod\trefused/Pod\thandshakes/Pod\twatch events/Pod\t")
	perPod := func(x float64, n int) string { return fmt.Sprintf("%.2f", x/float64(n)) }
	onRealNodes := map[int]bool{}
	for _, r := range report.Results {
		if r.Profile == ProfileReal {
			onRealNodes[r.Nodes] = true
		}
	}
	for _, s := range sums {
		handshakes := perPod(float64(s.Handshakes), s.Nodes)
		if onRealNodes[s.Nodes] {
			handshakes = "-"
		}
		split := func(actor string, f func(float64, int) string) string {
			return f(float64(s.CriticalRequests[actor]), s.Nodes) + " / " + f(float64(s.Requests[actor]), s.Nodes)
		}
		count := func(x float64, _ int) string { return fmt.Sprintf("%.0f", x) }
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1f\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", s.Nodes, s.Profile, s.Failure, s.Strategy,
			1000*s.ControlPlaneCPU/float64(s.Nodes), split(ActorController, count), s.ControllerPeriodic,
			split(ActorAgents, perPod), split(ActorKubelets, perPod),
			perPod(s.Rejected, s.Nodes), handshakes, perPod(s.WatchEvents, s.Nodes))
	}
	tw.Flush()

	if len(report.Floors) > 0 {
		fmt.Fprintln(w, "\nfloors: an in-place restart's requests, all at once (agents: watch + epoch patch; controller: 2 broadcast writes; kubelets: the 2 status writes per Pod they need (needed) or the 6 they make (kubelet))")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "N\tfloor\twrites/Pod\ttime\tagents done\twrites done\tneeded\tsent\trefused\thandshakes\twatch events\tCPU ms/Pod\t")
		cpuHeader(tw, cpuColumns)
		sort.SliceStable(report.Floors, func(i, j int) bool { return report.Floors[i].Nodes < report.Floors[j].Nodes })
		for _, f := range report.Floors {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%.0f\t%d\t%.0f\t%.1f\t", f.Nodes, f.Kind, f.StatusWritesPerPod, seconds(f.Total), seconds(f.Agents), seconds(f.StatusWrites),
				total(f.Needed), total(f.Requests), sum(f.Rejected), f.Handshakes, f.WatchEvents, 1000*controlPlaneCPU(f.CPUSeconds)/float64(f.Nodes))
			cpuCells(tw, cpuColumns, f.CPUSeconds)
		}
		tw.Flush()
	}
}

// ratio is a as a multiple of b, "" when b is zero.
func ratio(a, b float64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// RequestBreakdown prints the requests of one restart per size, failure
// and strategy by actor, verb and resource.
func RequestBreakdown(w io.Writer, report Report) {
	type key struct {
		n                 int
		failure, strategy string
	}
	seen := map[key]bool{}
	for _, r := range report.Results {
		k := key{r.Nodes, r.Failure, r.Strategy}
		if seen[k] {
			continue
		}
		seen[k] = true
		fmt.Fprintf(w, "\nrequests of one %s restart, N=%d, %s (profile %s):\n", r.Strategy, r.Nodes, r.Failure, r.Profile)
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
	if slices.ContainsFunc(report.Results, func(r Result) bool { return Strategy(r.Strategy).upstream() }) {
		// Its container's processes are no process the benchmark reads.
		fmt.Fprintln(w, "(upstream JobSet's controller runs in a container on a real node: its CPU is in no column; inplace-manager's is in this process's)")
	}
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

// FirstStarts prints the JobSets' first starts (real nodes), each strategy
// against Recreate's under the same controller, which runs no agent. Over
// several rounds a row is the median of the strategy's JobSets, and each
// JobSet is set against the Recreate of its own round: the median of those
// differences, and their range. Each column's median is taken on its own,
// so the medians of a row need not come from one run.
func FirstStarts(w io.Writer, report Report) {
	if len(report.FirstStarts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfirst start: from the JobSet's creation until every worker ran (the workers' logs); medians over the runs")
	if report.SupervisorVolume != "" {
		fmt.Fprintf(w, "the supervisor of process and in-process scope from agent.supervisorVolume %s\n", report.SupervisorVolume)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "N\tstrategy\truns\tfirst start\tvs without agent (Recreate, same round)\tPods seen\tagents up\tepochs written\tsynced\t")
	rows, runs := firstStartRows(report.FirstStarts)
	medianOf := func(fs []FirstStart, of func(FirstStart) time.Duration) time.Duration {
		return of(median(fs, func(a, b FirstStart) int { return cmp.Compare(of(a), of(b)) }))
	}
	took := func(f FirstStart) time.Duration { return f.Took }
	for _, r := range rows {
		fs := runs[r]
		vs := medianAndRange(againstRecreate(report.FirstStarts, fs, took), time.Duration.Seconds, 2)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.nodes, r.strategy, len(fs),
			seconds(medianOf(fs, took)), vs,
			orDash(medianOf(fs, func(f FirstStart) time.Duration { return f.PodsSeen })),
			orDash(medianOf(fs, func(f FirstStart) time.Duration { return f.AgentsStarted })),
			orDash(medianOf(fs, func(f FirstStart) time.Duration { return f.EpochsWritten })),
			orDash(medianOf(fs, func(f FirstStart) time.Duration { return f.Synced })))
	}
	tw.Flush()
}

// FirstStartCPUs prints what the machine's cores spent on each first start,
// from the JobSet's creation until it was steady: the cores busy on
// average, the CPU-seconds of each part ("-" where no run has the part),
// and how many more than Recreate's JobSet of the same round. Over rounds,
// each column is a median taken on its own.
func FirstStartCPUs(w io.Writer, report Report) {
	var accounted []FirstStart
	for _, f := range report.FirstStarts {
		if f.CPU != nil {
			accounted = append(accounted, f)
		}
	}
	if len(accounted) == 0 {
		return
	}
	rows, runs := firstStartRows(accounted)
	fmt.Fprintln(w, "\nfirst start's CPU: CPU-seconds from the JobSet's creation until it was steady; medians over the runs")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "N\tstrategy\twindow\tcores busy\tbusy\tvs Recreate\t%s\t\n", strings.Join(firstStartCPUColumns, "\t"))
	busy := func(f FirstStart) float64 { return f.CPU.Busy }
	for _, r := range rows {
		cs := make([]*FirstStartCPU, len(runs[r]))
		for i, f := range runs[r] {
			cs[i] = f.CPU
		}
		med := func(of func(*FirstStartCPU) float64) float64 {
			return of(median(cs, func(a, b *FirstStartCPU) int { return cmp.Compare(of(a), of(b)) }))
		}
		// Each run's columns, once: a missing column reads as zero.
		cols := make([]map[string]float64, len(cs))
		for i, c := range cs {
			cols[i] = c.byColumn()
		}
		vs := medianAndRange(againstRecreate(accounted, runs[r], busy), func(s float64) float64 { return s }, 1)
		fmt.Fprintf(tw, "%d\t%s\t%.2f s\t%.2f of %d\t%.1f s\t%s\t", r.nodes, r.strategy,
			med(func(c *FirstStartCPU) float64 { return c.Window.Seconds() }),
			med(func(c *FirstStartCPU) float64 { return c.Busy / c.Window.Seconds() }), cs[0].Cores,
			med(func(c *FirstStartCPU) float64 { return c.Busy }), vs)
		for _, col := range firstStartCPUColumns {
			var values []float64
			read := false
			for _, c := range cols {
				v, ok := c[col]
				values, read = append(values, v), read || ok
			}
			if !read {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.1f\t", median(values, cmp.Compare[float64]))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// firstStartRow is a row of the first-start tables: a size and a strategy.
type firstStartRow struct {
	nodes    int
	strategy string
}

// firstStartRows groups first starts by row, the rows in the order they
// first appear.
func firstStartRows(all []FirstStart) ([]firstStartRow, map[firstStartRow][]FirstStart) {
	var rows []firstStartRow
	runs := map[firstStartRow][]FirstStart{}
	for _, f := range all {
		r := firstStartRow{f.Nodes, f.Strategy}
		if _, ok := runs[r]; !ok {
			rows = append(rows, r)
		}
		runs[r] = append(runs[r], f)
	}
	return rows, runs
}

// againstRecreate sets each of fs against the Recreate JobSet of its size
// and round, run by the same controller (inplace's or upstream's), found
// in all: of(f) - of(that Recreate). Recreate's own JobSets, and those
// without a Recreate to set against, have no difference.
func againstRecreate[T ~int64 | ~float64](all, fs []FirstStart, of func(FirstStart) T) []T {
	type key struct {
		nodes    int
		upstream bool
		round    int
	}
	base := map[key]FirstStart{}
	for _, f := range all {
		if s := Strategy(f.Strategy); s == Recreate || s == UpstreamRecreate {
			base[key{f.Nodes, s.upstream(), f.Round}] = f
		}
	}
	var out []T
	for _, f := range fs {
		s := Strategy(f.Strategy)
		if b, ok := base[key{f.Nodes, s.upstream(), f.Round}]; ok && s != Recreate && s != UpstreamRecreate {
			out = append(out, of(f)-of(b))
		}
	}
	return out
}

// medianAndRange prints differences as "+1.00 s (+0.50…+2.00 s)", in
// seconds with the given decimals: the median, and the range if there
// is more than one; "-" if there is none.
func medianAndRange[T ~int64 | ~float64](diffs []T, seconds func(T) float64, decimals int) string {
	if len(diffs) == 0 {
		return "-"
	}
	out := fmt.Sprintf("%+.*f s", decimals, seconds(median(diffs, cmp.Compare[T])))
	if len(diffs) > 1 {
		out += fmt.Sprintf(" (%+.*f…%+.*f s)", decimals, seconds(slices.Min(diffs)), decimals, seconds(slices.Max(diffs)))
	}
	return out
}
