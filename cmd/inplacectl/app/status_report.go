package app

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// Event reasons of the JobSet controller that mark an in-place restart.
const (
	reasonInPlaceRestart     = "InPlaceRestart"
	reasonInPlaceRestartDone = "InPlaceRestartCompleted"
)

// statusInputs is what `inplacectl status` reads from the cluster.
type statusInputs struct {
	jobSet    *jobset.JobSet
	broadcast *protocol.Broadcast // nil without a broadcast ConfigMap
	pods      []corev1.Pod
	events    []corev1.Event
	// agentContainer names the injected agent.
	agentContainer string
}

// statusReport is what `status` shows: built once from statusInputs,
// printed as a table, or as JSON or YAML with -o.
type statusReport struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	RestartStrategy string `json:"restartStrategy"`
	// State is Active, Suspended, Completed or Failed; RestartState is
	// where the JobSet stands on its restart path (jobset.RestartStateOf),
	// as the controller decides on it.
	State                   string `json:"state"`
	RestartState            string `json:"restartState"`
	Restarts                int32  `json:"restarts"`
	InPlaceRestarts         int32  `json:"inPlaceRestarts"`
	RestartsCountTowardsMax int32  `json:"restartsCountTowardsMax"`
	MaxRestarts             int32  `json:"maxRestarts"`
	// InPlace is set for restartStrategy InPlaceRestart only.
	InPlace *inPlaceReport `json:"inPlace,omitempty"`
}

type inPlaceReport struct {
	Scope           string `json:"scope"`
	SyncedEpoch     int32  `json:"syncedEpoch"`
	DeprecatedEpoch int32  `json:"deprecatedEpoch"`
	// WaitingForEpoch is the epoch every Pod must reach while a restart is
	// in progress, 0 when none is.
	WaitingForEpoch int32 `json:"waitingForEpoch,omitempty"`
	// Broadcast is the broadcast ConfigMap the agents read, nil when it is
	// not written yet.
	Broadcast *broadcastReport `json:"broadcast"`
	// Reports says where the agents report: "direct" (to the controller's
	// leader, whose address follows) or "pod" (on their Pods' epoch
	// annotation).
	Reports        string                `json:"reports"`
	ReportAddress  string                `json:"reportAddress,omitempty"`
	ReplicatedJobs []replicatedJobReport `json:"replicatedJobs"`
	Pods           []podReport           `json:"pods"`
	// LastRestart is the timeline of the last in-place restart, empty when
	// there was none.
	LastRestart []moment `json:"lastRestart"`
}

type broadcastReport struct {
	DeprecatedEpoch    int32    `json:"deprecatedEpoch"`
	SyncedEpoch        int32    `json:"syncedEpoch"`
	OpenReplicatedJobs []string `json:"openReplicatedJobs,omitempty"`
	// BehindStatus: its epochs are not yet the JobSet status's.
	BehindStatus bool `json:"behindStatus"`
}

type replicatedJobReport struct {
	Name string `json:"name"`
	// Replicas is the number of Jobs of the replicated job.
	Replicas int32 `json:"replicas"`
	// Pods, AtSyncedEpoch and Ready count its Pods not being deleted.
	Pods          int    `json:"pods"`
	AtSyncedEpoch int    `json:"atSyncedEpoch"`
	Ready         int    `json:"ready"`
	Barrier       string `json:"barrier"`
}

type podReport struct {
	Name          string `json:"name"`
	ReplicatedJob string `json:"replicatedJob"`
	Node          string `json:"node,omitempty"`
	Phase         string `json:"phase,omitempty"`
	// Epoch is the Pod's epoch annotation as written, empty without one.
	Epoch string `json:"epoch,omitempty"`
	Ready bool   `json:"ready"`
	// WorkerRestarts: in process scope the count the agent keeps on the
	// Pod (the containers do not restart), otherwise the sum of the
	// containers' restartCount.
	WorkerRestarts string `json:"workerRestarts"`
}

type moment struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
	// Coarse: known to the second only (container start times); the moment
	// lies in [at, at+1s).
	Coarse bool `json:"coarse,omitempty"`
}

// buildStatusReport is the report of in: the JobSet's epochs, the barrier
// of every replicated job, its Pods and the timeline of the last in-place
// restart.
func buildStatusReport(in statusInputs) statusReport {
	js := in.jobSet
	r := statusReport{Namespace: js.Namespace, Name: js.Name, RestartStrategy: string(jobset.Recreate),
		Restarts: js.Status.Restarts, InPlaceRestarts: js.Status.InPlaceRestarts, RestartsCountTowardsMax: js.Status.RestartsCountTowardsMax}
	if js.Spec.FailurePolicy != nil {
		r.RestartStrategy, r.MaxRestarts = string(js.Spec.FailurePolicy.RestartStrategy), js.Spec.FailurePolicy.MaxRestarts
	}
	// One reading of the status for every line: the state, the wait for
	// an epoch and the barriers. A suspended JobSet is Suspended once the
	// controller suspended its Jobs (spec.suspend alone may be a moment
	// ahead), and not restarting in place: its Pods are gone.
	state := jobset.RestartStateOf(js, &js.Status)
	r.RestartState = string(state)
	switch state {
	case jobset.StateFailed, jobset.StateCompleted, jobset.StateSuspended:
		r.State = string(state)
	default:
		r.State = "Active"
	}
	if r.RestartStrategy != string(jobset.InPlaceRestart) {
		return r
	}
	// A restart under way (in place, or recreating the Jobs) waits for
	// every Pod at the next epoch; a JobSet whose agents stand aside
	// (in-place restarts disabled) waits for none.
	restarting := jobset.InPlaceActive(js) && state.RestartUnderWay()
	ip := &inPlaceReport{Scope: js.Annotations[protocol.RestartScopeAnnotation], SyncedEpoch: js.Status.SyncedEpoch, DeprecatedEpoch: js.Status.DeprecatedEpoch}
	if ip.Scope == "" {
		ip.Scope = protocol.RestartScopeContainer
	}
	if restarting {
		ip.WaitingForEpoch = js.Status.DeprecatedEpoch + 1
	}
	ip.Reports = "pod"
	if b := in.broadcast; b != nil && !b.Reports.IsZero() {
		ip.Reports, ip.ReportAddress = "direct", b.Reports.Address
	}
	if b := in.broadcast; b != nil {
		ip.Broadcast = &broadcastReport{DeprecatedEpoch: b.DeprecatedEpoch, SyncedEpoch: b.SyncedEpoch, OpenReplicatedJobs: b.OpenReplicatedJobs,
			BehindStatus: !b.Equal(protocol.Broadcast{DeprecatedEpoch: js.Status.DeprecatedEpoch, SyncedEpoch: js.Status.SyncedEpoch, OpenReplicatedJobs: b.OpenReplicatedJobs, Reports: b.Reports})}
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		rr := replicatedJobReport{Name: rj.Name, Replicas: rj.Replicas, Barrier: barrier(state, restarting, in.broadcast, rj.Name)}
		for _, p := range in.pods {
			if p.Labels[jobset.ReplicatedJobNameKey] != rj.Name || p.DeletionTimestamp != nil {
				continue
			}
			rr.Pods++
			e, err := protocol.ParseEpoch(p.Annotations[jobset.EpochKey])
			switch {
			case err == nil && e == protocol.Epoch(js.Status.SyncedEpoch):
				rr.AtSyncedEpoch++
			case err != nil && ip.Reports == "direct" && state == jobset.StateRunning && js.Status.SyncedEpoch > 0 && p.Status.Phase == "Running":
				// Its agent told the controller, which synced the group
				// only once every Pod had reported the synced epoch.
				rr.AtSyncedEpoch++
			}
			if podReady(p) {
				rr.Ready++
			}
		}
		ip.ReplicatedJobs = append(ip.ReplicatedJobs, rr)
	}
	for _, p := range in.pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ip.Pods = append(ip.Pods, podReport{Name: p.Name, ReplicatedJob: p.Labels[jobset.ReplicatedJobNameKey], Node: p.Spec.NodeName,
			Phase: string(p.Status.Phase), Epoch: p.Annotations[jobset.EpochKey], Ready: podReady(p), WorkerRestarts: workerRestarts(p)})
	}
	ip.LastRestart = lastRestart(in)
	r.InPlace = ip
	return r
}

// writeStatusTable prints the report for a terminal; wide adds the
// replicated jobs' replicas and the Pods' replicated job, node and phase.
func writeStatusTable(out io.Writer, r statusReport, wide bool) {
	fmt.Fprintf(out, "JobSet %s/%s  strategy %s  state %s", r.Namespace, r.Name, r.RestartStrategy, r.State)
	if r.State != r.RestartState {
		// Active: where its restart stands says more.
		fmt.Fprintf(out, " (%s)", r.RestartState)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "restarts %d (%d in place; %d of maxRestarts %d counted)\n",
		r.Restarts, r.InPlaceRestarts, r.RestartsCountTowardsMax, r.MaxRestarts)
	ip := r.InPlace
	if ip == nil {
		return
	}
	fmt.Fprintf(out, "scope    %s\n", ip.Scope)
	if ip.Reports == "direct" {
		fmt.Fprintf(out, "reports  to the controller's leader at %s (Pods carry no epoch)\n", ip.ReportAddress)
	}
	fmt.Fprintf(out, "epochs   synced %d  deprecated %d", ip.SyncedEpoch, ip.DeprecatedEpoch)
	if ip.WaitingForEpoch > 0 {
		fmt.Fprintf(out, "  (restart in progress: waiting for every Pod at epoch %d)", ip.WaitingForEpoch)
	}
	fmt.Fprintln(out)
	switch b := ip.Broadcast; {
	case b == nil:
		fmt.Fprintf(out, "broadcast %s not written yet\n", protocol.BroadcastName(r.Name))
	case b.BehindStatus:
		fmt.Fprintf(out, "broadcast behind the status: deprecated %d synced %d\n", b.DeprecatedEpoch, b.SyncedEpoch)
	}

	fmt.Fprintln(out, "\nbarriers")
	tw := newTable(out, wide,
		"  REPLICATED JOB\tPODS\tAT SYNCED EPOCH\tREADY\tBARRIER",
		"  REPLICATED JOB\tREPLICAS\tPODS\tAT SYNCED EPOCH\tREADY\tBARRIER")
	for _, rj := range ip.ReplicatedJobs {
		if wide {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\n", rj.Name, rj.Replicas, rj.Pods, rj.AtSyncedEpoch, rj.Ready, rj.Barrier)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\n", rj.Name, rj.Pods, rj.AtSyncedEpoch, rj.Ready, rj.Barrier)
	}
	tw.Flush()

	writePods(out, r, wide)

	fmt.Fprintln(out, "\nlast in-place restart")
	if len(ip.LastRestart) == 0 {
		fmt.Fprintln(out, "  none")
		return
	}
	start := ip.LastRestart[0].At
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, m := range ip.LastRestart {
		if m.Coarse {
			// Known to the second: the moment lies in [at, at+1s), and not
			// before the restart began.
			lo := max(m.At.Sub(start), 0)
			hi := m.At.Add(time.Second).Sub(start)
			fmt.Fprintf(tw, "  %s\t+%.3f..%.3fs\t%s\n", m.At.UTC().Format("15:04:05"), lo.Seconds(), hi.Seconds(), m.What)
			continue
		}
		fmt.Fprintf(tw, "  %s\t+%.3fs\t%s\n", m.At.UTC().Format("15:04:05.000"), m.At.Sub(start).Seconds(), m.What)
	}
	tw.Flush()
}

// newTable starts a table on out under its header: wideHeader for -o
// wide, header otherwise.
func newTable(out io.Writer, wide bool, header, wideHeader string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if wide {
		header = wideHeader
	}
	fmt.Fprintln(tw, header)
	return tw
}

// maxPodsShown bounds the Pods table: a JobSet of thousands of Pods is
// summed up in the barriers table above it (-o json and yaml list all).
const maxPodsShown = 50

// writePods prints each Pod's epoch and its workers' restarts.
func writePods(out io.Writer, r statusReport, wide bool) {
	fmt.Fprintln(out, "\npods")
	tw := newTable(out, wide,
		"  POD\tEPOCH\tREADY\tWORKER RESTARTS",
		"  POD\tREPLICATED JOB\tNODE\tPHASE\tEPOCH\tREADY\tWORKER RESTARTS")
	for i, p := range r.InPlace.Pods {
		if i == maxPodsShown {
			fmt.Fprintf(tw, "  ... %d Pods in all: kubectl get pods -n %s -l %s=%s\n", len(r.InPlace.Pods), r.Namespace, jobset.JobSetNameKey, r.Name)
			break
		}
		epoch := p.Epoch
		if epoch == "" {
			epoch = "-"
		}
		if wide {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%t\t%s\n", p.Name, p.ReplicatedJob, orDash(p.Node), orDash(p.Phase), epoch, p.Ready, p.WorkerRestarts)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%t\t%s\n", p.Name, epoch, p.Ready, p.WorkerRestarts)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func workerRestarts(p corev1.Pod) string {
	if v, ok := p.Annotations[protocol.WorkerRestartsAnnotation]; ok {
		return v
	}
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return fmt.Sprint(n)
}

// barrier says whether the agents of a replicated job's Pods hold their
// workers back, by the JobSet's restart state (restarting: one under way
// that waits for an epoch) and then by the broadcast they read.
func barrier(state jobset.RestartState, restarting bool, b *protocol.Broadcast, rj string) string {
	switch {
	case restarting:
		return "held: restarting"
	case state == jobset.StateSuspended:
		return "held: suspended"
	case state == jobset.StateStarting, b == nil || b.SyncedEpoch == 0:
		return "held: starting"
	case !b.Open(rj):
		return "held: waiting for the replicated jobs before it (InOrder)"
	}
	return "lifted"
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// lastRestart is the timeline of the last in-place restart: the
// controller's Events (microseconds) and the containers' start times
// (seconds, as the kubelet reports them).
func lastRestart(in statusInputs) []moment {
	var began, done *corev1.Event
	for i := range in.events {
		e := &in.events[i]
		switch e.Reason {
		case reasonInPlaceRestart:
			if began == nil || eventTime(*e).After(eventTime(*began)) {
				began = e
			}
		case reasonInPlaceRestartDone:
			if done == nil || eventTime(*e).After(eventTime(*done)) {
				done = e
			}
		}
	}
	if began == nil {
		return nil
	}
	start := eventTime(*began)
	timeline := []moment{{start, "failure seen, epoch deprecated: " + began.Message, false}}
	var agents, workers time.Time
	for _, p := range in.pods {
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.Name == in.agentContainer && cs.State.Running != nil && cs.State.Running.StartedAt.After(agents) {
				agents = cs.State.Running.StartedAt.Time
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && cs.State.Running.StartedAt.After(workers) {
				workers = cs.State.Running.StartedAt.Time
			}
		}
	}
	// Container times have a resolution of a second: shown when they fall
	// in the restart's second or later.
	if !agents.IsZero() && !agents.Before(start.Truncate(time.Second)) {
		timeline = append(timeline, moment{agents, "every agent restarted (last agent start)", true})
	}
	if done != nil && !eventTime(*done).Before(start) {
		timeline = append(timeline, moment{eventTime(*done), "every Pod at the new epoch: barriers lifted", false})
	}
	if !workers.IsZero() && !workers.Before(start.Truncate(time.Second)) {
		timeline = append(timeline, moment{workers, "every worker running (last worker start)", true})
	}
	slices.SortStableFunc(timeline[1:], func(a, b moment) int { return a.At.Compare(b.At) })
	return timeline
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
