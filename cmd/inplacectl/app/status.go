package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

func status(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	namespace := fs.String("n", "", "namespace of the JobSet (default: the kubeconfig's)")
	kubeconfig := fs.String("kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	agentName := fs.String("agent-container", "inplace-agent", "name of the injected agent container")
	name, rest := "", args
	if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2, usageError{fmt.Errorf("status: %w", err)}
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if name == "" || fs.NArg() > 0 {
		return 2, usageError{fmt.Errorf("status: name one JobSet: inplacectl status JOBSET [-n NAMESPACE]")}
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return 1, fmt.Errorf("status: loading the kubeconfig: %w", err)
	}
	ns := *namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return 1, err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return 1, err
	}
	if err := jobset.AddToScheme(scheme); err != nil {
		return 1, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return 1, err
	}
	in, err := readStatus(ctx, c, ns, name)
	if err != nil {
		return 1, err
	}
	in.agentContainer = *agentName
	writeStatus(out, in)
	return 0, nil
}

func readStatus(ctx context.Context, c client.Client, namespace, name string) (statusInputs, error) {
	var in statusInputs
	js := &jobset.JobSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, js); err != nil {
		if apierrors.IsNotFound(err) {
			return in, fmt.Errorf("JobSet %s/%s not found", namespace, name)
		}
		return in, err
	}
	in.jobSet = js
	var cm corev1.ConfigMap
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: protocol.BroadcastName(name)}, &cm); {
	case err == nil:
		b, err := protocol.DecodeBroadcast(cm.Data)
		if err != nil {
			return in, fmt.Errorf("the broadcast ConfigMap %s: %w", cm.Name, err)
		}
		in.broadcast = &b
	case !apierrors.IsNotFound(err):
		return in, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{jobset.JobSetNameKey: name}); err != nil {
		return in, err
	}
	in.pods = pods.Items
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(js.UID))}); err != nil {
		return in, err
	}
	in.events = events.Items
	return in, nil
}

// writeStatus prints the report: the JobSet's epochs, the barrier of every
// replicated job, and the timeline of the last in-place restart.
func writeStatus(out io.Writer, in statusInputs) {
	js := in.jobSet
	strategy := jobset.Recreate
	maxRestarts := int32(0)
	if js.Spec.FailurePolicy != nil {
		strategy, maxRestarts = js.Spec.FailurePolicy.RestartStrategy, js.Spec.FailurePolicy.MaxRestarts
	}
	state := js.Status.TerminalState
	if state == "" {
		state = "Active"
		if ptr.Deref(js.Spec.Suspend, false) {
			state = "Suspended"
		}
	}
	fmt.Fprintf(out, "JobSet %s/%s  strategy %s  state %s\n", js.Namespace, js.Name, strategy, state)
	fmt.Fprintf(out, "restarts %d (%d in place; %d of maxRestarts %d counted)\n",
		js.Status.Restarts, js.Status.InPlaceRestarts, js.Status.RestartsCountTowardsMax, maxRestarts)
	if strategy != jobset.InPlaceRestart {
		return
	}
	scope := js.Annotations[protocol.RestartScopeAnnotation]
	if scope == "" {
		scope = protocol.RestartScopeContainer
	}
	fmt.Fprintf(out, "scope    %s\n", scope)
	fmt.Fprintf(out, "epochs   synced %d  deprecated %d", js.Status.SyncedEpoch, js.Status.DeprecatedEpoch)
	if js.Status.DeprecatedEpoch >= js.Status.SyncedEpoch && js.Status.DeprecatedEpoch > 0 {
		fmt.Fprintf(out, "  (restart in progress: waiting for every Pod at epoch %d)", js.Status.DeprecatedEpoch+1)
	}
	fmt.Fprintln(out)
	if in.broadcast == nil {
		fmt.Fprintf(out, "broadcast %s not written yet\n", protocol.BroadcastName(js.Name))
	} else if !in.broadcast.Equal(protocol.Broadcast{DeprecatedEpoch: js.Status.DeprecatedEpoch, SyncedEpoch: js.Status.SyncedEpoch, OpenReplicatedJobs: in.broadcast.OpenReplicatedJobs}) {
		fmt.Fprintf(out, "broadcast behind the status: deprecated %d synced %d\n", in.broadcast.DeprecatedEpoch, in.broadcast.SyncedEpoch)
	}

	fmt.Fprintln(out, "\nbarriers")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REPLICATED JOB\tPODS\tAT SYNCED EPOCH\tREADY\tBARRIER")
	for _, rj := range js.Spec.ReplicatedJobs {
		total, atSynced, ready := 0, 0, 0
		for _, p := range in.pods {
			if p.Labels[jobset.ReplicatedJobNameKey] != rj.Name || p.DeletionTimestamp != nil {
				continue
			}
			total++
			if e, err := protocol.ParseEpoch(p.Annotations[jobset.EpochKey], false); err == nil && e == js.Status.SyncedEpoch {
				atSynced++
			}
			if podReady(p) {
				ready++
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\n", rj.Name, total, atSynced, ready, barrier(js, in.broadcast, rj.Name))
	}
	tw.Flush()

	writePods(out, js, in.pods)

	fmt.Fprintln(out, "\nlast in-place restart")
	timeline := lastRestart(in)
	if len(timeline) == 0 {
		fmt.Fprintln(out, "  none")
		return
	}
	start := timeline[0].at
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, m := range timeline {
		if m.coarse {
			// Known to the second: the moment lies in [at, at+1s), and not
			// before the restart began.
			lo := max(m.at.Sub(start), 0)
			hi := m.at.Add(time.Second).Sub(start)
			fmt.Fprintf(tw, "  %s\t+%.3f..%.3fs\t%s\n", m.at.UTC().Format("15:04:05"), lo.Seconds(), hi.Seconds(), m.what)
			continue
		}
		fmt.Fprintf(tw, "  %s\t+%.3fs\t%s\n", m.at.UTC().Format("15:04:05.000"), m.at.Sub(start).Seconds(), m.what)
	}
	tw.Flush()
}

// maxPodsShown bounds the Pods table: a JobSet of thousands of Pods is
// summed up in the barriers table above it.
const maxPodsShown = 50

// writePods prints each Pod's epoch and its workers' restarts: in process
// scope the count the agent keeps on the Pod (the containers do not
// restart), otherwise the worker containers' restartCount.
func writePods(out io.Writer, js *jobset.JobSet, pods []corev1.Pod) {
	fmt.Fprintln(out, "\npods")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tEPOCH\tREADY\tWORKER RESTARTS")
	shown := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if shown == maxPodsShown {
			fmt.Fprintf(tw, "  ... %d Pods in all: kubectl get pods -n %s -l %s=%s\n", len(pods), js.Namespace, jobset.JobSetNameKey, js.Name)
			break
		}
		shown++
		epoch := p.Annotations[jobset.EpochKey]
		if epoch == "" {
			epoch = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%t\t%s\n", p.Name, epoch, podReady(p), workerRestarts(p))
	}
	tw.Flush()
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

func barrier(js *jobset.JobSet, b *protocol.Broadcast, rj string) string {
	switch {
	case js.Status.DeprecatedEpoch >= js.Status.SyncedEpoch && js.Status.DeprecatedEpoch > 0:
		return "held: restarting"
	case b == nil || b.SyncedEpoch == 0:
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

type moment struct {
	at   time.Time
	what string
	// coarse: known to the second only (container start times).
	coarse bool
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
	slices.SortStableFunc(timeline[1:], func(a, b moment) int { return a.at.Compare(b.at) })
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
