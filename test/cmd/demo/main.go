package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/wrappers"
)

const workers = 8

func main() {
	kubeconfig := flag.String("cluster-kubeconfig", ".local/kubeconfig", "kubeconfig of the local cluster")
	kubectl := flag.String("kubectl", "bin/kubectl", "kubectl, to make a worker on a real node fail as a person would")
	flag.Parse()
	if err := run(*kubeconfig, *kubectl); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo is how the demo runs on the cluster it found.
type demo struct {
	c client.Client
	// real: the nodes are real kubelets; workers run the test worker image
	// and fail through kubectl exec. Otherwise simulated nodes make a
	// worker exit when its Pod is annotated.
	real                bool
	kubeconfig, kubectl string
}

func run(kubeconfig, kubectl string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: managerapp.NewScheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := &demo{c: c, kubeconfig: kubeconfig, kubectl: kubectl}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		d.real = d.real || strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-"}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.Background(), ns) }()
	if err := poll(ctx, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil
	}); err != nil {
		return err
	}

	inPlace, err := d.scenario(ctx, ns.Name, "train-inplace", jobset.InPlaceRestart)
	if err != nil {
		return err
	}
	recreate, err := d.scenario(ctx, ns.Name, "train-recreate", jobset.Recreate)
	if err != nil {
		return err
	}
	fmt.Printf("\n== totals: one worker exit to every worker running again (%d workers)\n", 2*workers)
	fmt.Printf("   InPlaceRestart  %7.2fs\n", inPlace.Seconds())
	fmt.Printf("   Recreate        %7.2fs   (%.1fx the in-place time)\n", recreate.Seconds(), recreate.Seconds()/inPlace.Seconds())
	return nil
}

func (d *demo) jobSet(name, ns string, strategy jobset.JobSetRestartStrategy) *jobset.JobSet {
	js := wrappers.MakeJobSet(name, ns).FailurePolicy(&jobset.FailurePolicy{RestartStrategy: strategy, MaxRestarts: 3})
	for _, rj := range []string{"trainers", "evaluators"} {
		r := wrappers.MakeReplicatedJob(rj).Parallelism(workers).Obj()
		if strategy == jobset.InPlaceRestart {
			// What the user writes: nothing but the workers; the webhook
			// injects the rest.
			r.Template.Spec.BackoffLimit = nil
		}
		if d.real {
			pod := &r.Template.Spec.Template.Spec
			pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
			pod.Containers[0].Image = images.Worker
			pod.Containers[0].Env = []corev1.EnvVar{{Name: "BARRIER_URL", Value: "http://127.0.0.1:18080/barrier-is-lifted"}}
		}
		js.ReplicatedJob(r)
	}
	return js.Obj()
}

// scenario creates the JobSet, waits for every worker, makes one exit with
// code 1 and prints the timeline of the recovery.
func (d *demo) scenario(ctx context.Context, ns, name string, strategy jobset.JobSetRestartStrategy) (time.Duration, error) {
	c := d.c
	fmt.Printf("\n== %s: a JobSet of 2 replicated jobs x %d workers, restartStrategy %s\n", name, workers, strategy)
	js := d.jobSet(name, ns, strategy)
	if err := c.Create(ctx, js); err != nil {
		return 0, err
	}
	start := time.Now()
	original := map[string]bool{}
	if err := poll(ctx, func() bool {
		pods := podsOf(ctx, c, js)
		for _, p := range pods {
			original[string(p.UID)] = true
		}
		return len(pods) == 2*workers && allRunning(pods, nil)
	}); err != nil {
		return 0, fmt.Errorf("waiting for the workers: %w", err)
	}
	fmt.Printf("   every worker running after %.2fs\n", time.Since(start).Seconds())

	victim := podsOf(ctx, c, js)[3]
	t0 := time.Now()
	if err := d.fail(ctx, victim); err != nil {
		return 0, err
	}
	fmt.Printf("   worker of %s exits with code 1\n", victim.Name)

	events := map[string]time.Duration{}
	mark := func(what string, cond bool) {
		if _, seen := events[what]; cond && !seen {
			events[what] = time.Since(t0)
		}
	}
	err := poll(ctx, func() bool {
		var cur jobset.JobSet
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), &cur); err != nil {
			return false
		}
		pods := podsOf(ctx, c, js)
		mark("failure seen by the controller (restart counted)", cur.Status.Restarts >= 1)
		if strategy == jobset.InPlaceRestart {
			mark("epoch 1 deprecated", cur.Status.DeprecatedEpoch >= 1)
			mark("every agent restarted in place", len(pods) == 2*workers && allAgentsRestarted(pods))
			mark("barrier lifted: epoch 2 synced", cur.Status.SyncedEpoch >= 2)
			done := len(pods) == 2*workers && cur.Status.SyncedEpoch >= 2 && allRunning(pods, nil)
			mark("every worker running again", done)
			return done
		}
		fresh := func(p corev1.Pod) bool { return !original[string(p.UID)] }
		mark("old Pods gone", countIf(pods, func(p corev1.Pod) bool { return !fresh(p) }) == 0)
		mark("new Pods created", countIf(pods, fresh) == 2*workers)
		done := len(pods) == 2*workers && allRunning(pods, fresh)
		mark("every worker running again", done)
		return done
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the recovery: %w", err)
	}
	type step struct {
		what string
		at   time.Duration
	}
	var steps []step
	for w, at := range events {
		steps = append(steps, step{w, at})
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	for _, s := range steps {
		fmt.Printf("   +%6.2fs  %s\n", s.at.Seconds(), s.what)
	}
	return events["every worker running again"], nil
}

// fail makes the worker of victim exit with code 1: on a real node through
// kubectl exec into its container, on a simulated one by an annotation.
func (d *demo) fail(ctx context.Context, victim corev1.Pod) error {
	if d.real {
		return images.ExitWorker(ctx, d.kubectl, d.kubeconfig, victim.Namespace, victim.Name, "worker", 1)
	}
	patch := client.MergeFrom(victim.DeepCopy())
	victim.Annotations[simnode.ExitCodeAnnotation] = "1"
	return d.c.Patch(ctx, &victim, patch)
}

func podsOf(ctx context.Context, c client.Client, js *jobset.JobSet) []corev1.Pod {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name}); err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func allRunning(pods []corev1.Pod, keep func(corev1.Pod) bool) bool {
	for _, p := range pods {
		if keep != nil && !keep(p) {
			return false
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false
			}
		}
	}
	return true
}

func allAgentsRestarted(pods []corev1.Pod) bool {
	for _, p := range pods {
		restarted := false
		for _, cs := range p.Status.InitContainerStatuses {
			restarted = restarted || (cs.Name == "inplace-agent" && cs.RestartCount >= 1)
		}
		if !restarted {
			return false
		}
	}
	return true
}

func countIf(pods []corev1.Pod, f func(corev1.Pod) bool) int {
	n := 0
	for _, p := range pods {
		if f(p) {
			n++
		}
	}
	return n
}

func poll(ctx context.Context, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
}
