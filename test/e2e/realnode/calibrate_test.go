package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
)

// podView is what a controller reads of a Pod's status: a change of it is
// a status write that matters. Status writes that change nothing of it
// (the kubelet's report of the container resources on cgroup v1, say) are
// counted apart.
type podView struct {
	Phase      corev1.PodPhase
	Conditions string
	Containers string
}

func viewOf(p *corev1.Pod) podView {
	var conds []string
	for _, c := range p.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	slices.Sort(conds)
	var cs []string
	for _, s := range util.ContainerStatuses(p) {
		cs = append(cs, fmt.Sprintf("%s[%s last=%s restarts=%d ready=%v started=%v]",
			s.Name, stateOf(s.State), stateOf(s.LastTerminationState), s.RestartCount, s.Ready, s.Started != nil && *s.Started))
	}
	return podView{Phase: p.Status.Phase, Conditions: strings.Join(conds, ","), Containers: strings.Join(cs, " ")}
}

func stateOf(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d,%s)", s.Terminated.ExitCode, s.Terminated.Reason)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "-"
}

// statusLog records, per Pod of a namespace, every status the apiserver
// sent after it began.
type statusLog struct {
	mu    sync.Mutex
	views map[string][]podView
	// raw counts every update whose status changed at all.
	raw  map[string]int
	last map[string]corev1.PodStatus
}

func recordStatuses(ns string) *statusLog {
	GinkgoHelper()
	list, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	l := &statusLog{views: map[string][]podView{}, raw: map[string]int{}, last: map[string]corev1.PodStatus{}}
	for _, p := range list.Items {
		l.views[p.Name] = []podView{viewOf(&p)}
		l.last[p.Name] = p.Status
	}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			l.mu.Lock()
			if !equalStatus(l.last[p.Name], p.Status) {
				l.raw[p.Name]++
				l.last[p.Name] = p.Status
				v := viewOf(p)
				if vs := l.views[p.Name]; len(vs) == 0 || vs[len(vs)-1] != v {
					l.views[p.Name] = append(vs, v)
				}
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func equalStatus(a, b corev1.PodStatus) bool {
	return a.String() == b.String()
}

// shape is what one Pod's restart looked like from the API: every state a
// controller could read, in order, and how many status writes carried them.
type shape struct {
	States    []podView
	RawWrites int
}

// lastSeen is the last state seen of pod.
func (l *statusLog) lastSeen(pod string) podView {
	l.mu.Lock()
	defer l.mu.Unlock()
	vs := l.views[pod]
	if len(vs) == 0 {
		return podView{}
	}
	return vs[len(vs)-1]
}

func (l *statusLog) shape(pod string) shape {
	l.mu.Lock()
	defer l.mu.Unlock()
	return shape{States: slices.Clone(l.views[pod][1:]), RawWrites: l.raw[pod]}
}

func (s shape) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d states in %d status writes:\n", len(s.States), s.RawWrites)
	for i, v := range s.States {
		fmt.Fprintf(&b, "  %d. %s %s %s\n", i+1, v.Phase, v.Conditions, v.Containers)
	}
	return b.String()
}

// mergedFrom reports whether real is sim with at most one state left out:
// under load the kubelet's status manager may merge two updates that come
// close together into one write. The last state, the one the story waits
// for, is never left out; the first only when firstMayMerge, since for a
// Pod that restarts in place the first write is the one that carries the
// exit code, which a controller must see.
func mergedFrom(real, sim []podView, firstMayMerge bool) bool {
	if slices.Equal(real, sim) {
		return true
	}
	if len(real) == 0 || len(sim)-len(real) != 1 || real[len(real)-1] != sim[len(sim)-1] {
		return false
	}
	if !firstMayMerge && real[0] != sim[0] {
		return false
	}
	i := 0
	for _, v := range sim {
		if i < len(real) && real[i] == v {
			i++
		}
	}
	return i == len(real)
}

// calibration is one run of the same story on one kind of node: a worker
// exits with 1 (its Pod restarts in place for its worker's exit, the other
// for its agent's), and then a worker exits with 0.
type calibration struct {
	WorkerExit, AgentExit, Success shape
}

func calibrate(kind string, nodeSelector map[string]string, exit func(corev1.Pod, int)) calibration {
	GinkgoHelper()
	ns := specNamespace()
	js := workerJobSet("calibrate-"+kind, ns.Name, nil)
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = nodeSelector
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	expectRunning(js, 1)
	pods := podsOf(js)
	failing, other := pods[0], pods[1]

	log := recordStatuses(ns.Name)
	exit(failing, 1)
	expectRunning(js, 2)
	// Both Pods seen Ready again: the restart's last write.
	Eventually(func(g Gomega) {
		for _, p := range pods {
			g.Expect(log.lastSeen(p.Name).Conditions).To(ContainSubstring(",Ready=True"), p.Name)
		}
	}).WithTimeout(timeout).Should(Succeed())
	var out calibration
	out.WorkerExit = log.shape(failing.Name)
	out.AgentExit = log.shape(other.Name)

	log = recordStatuses(ns.Name)
	exit(other, 0)
	Eventually(func() corev1.PodPhase { return log.lastSeen(other.Name).Phase }).WithTimeout(timeout).Should(Equal(corev1.PodSucceeded))
	out.Success = log.shape(other.Name)
	Expect(k8sClient.Delete(ctx, js)).To(Succeed())
	return out
}

// calibrateLone runs a Pod without sidecars, as a Recreate JobSet's Pods
// are, until its worker exits 1 and its end is reported: what the Job
// controller reads before it counts the failure.
func calibrateLone(kind string, nodeSelector map[string]string, exit func(corev1.Pod, int)) shape {
	GinkgoHelper()
	ns := specNamespace()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lone-" + kind, Namespace: ns.Name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			NodeSelector:                  nodeSelector,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers:                    []corev1.Container{{Name: "worker", Image: images.Worker}},
		},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)))
	}).WithTimeout(timeout).Should(Succeed())
	log := recordStatuses(ns.Name)
	exit(*pod, 1)
	Eventually(func(g Gomega) {
		v := log.lastSeen(pod.Name)
		g.Expect(v.Phase).To(Equal(corev1.PodFailed))
		g.Expect(v.Conditions).To(ContainSubstring("PodReadyToStartContainers=False"))
	}).WithTimeout(timeout).Should(Succeed())
	return log.shape(pod.Name)
}

var _ = Describe("the simulated node, calibrated against the real kubelet", func() {
	It("shows the same sequence of Pod states (phase, conditions, container states and last states) as the real kubelet for a worker exit, an agent exit, a success, and a Pod without sidecars failing", func() {
		realNode := map[string]string{corev1.LabelHostname: fw.Cluster.NodeNames()[0]}
		real := calibrate("real", realNode, exitWorker)
		realLone := calibrateLone("real", realNode, exitWorker)

		simCtx, stopSim := context.WithCancel(ctx)
		sim, err := simnode.Start(simCtx, simnode.Options{
			Client: kubernetes.NewForConfigOrDie(cfg), Nodes: 1, Prefix: "calibration",
			AgentContainer: agentContainer, Log: zap.New(zap.WriteTo(GinkgoWriter)),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			stopSim()
			sim.Wait()
			Expect(clientset.CoreV1().Nodes().Delete(ctx, "calibration-0", metav1.DeleteOptions{})).To(Succeed())
		})
		simExit := func(p corev1.Pod, code int) {
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, simnode.ExitCodeAnnotation, code))
			Expect(k8sClient.Patch(ctx, &p, patch)).To(Succeed())
		}
		simNode := map[string]string{simnode.NodeLabel: "true"}
		simulated := calibrate("sim", simNode, simExit)
		simLone := calibrateLone("sim", simNode, simExit)
		for _, c := range []struct {
			name      string
			real, sim shape
			// firstMayMerge: the real kubelet may write the worker's
			// exit of a Pod without sidecars together with its terminal
			// phase, when the two come close together.
			firstMayMerge bool
		}{
			{"a worker's exit", real.WorkerExit, simulated.WorkerExit, false},
			{"an agent's exit", real.AgentExit, simulated.AgentExit, false},
			{"a success", real.Success, simulated.Success, false},
			{"a Pod without sidecars whose worker exits 1", realLone, simLone, true},
		} {
			GinkgoWriter.Printf("%s, real kubelet: %s%s, simulated: %s", c.name, c.real, c.name, c.sim)
			Expect(mergedFrom(c.real.States, c.sim.States, c.firstMayMerge)).To(BeTrue(), "%s: the simulated node's states differ from the real kubelet's\nreal: %s\nsimulated: %s", c.name, c.real, c.sim)
			// Some status writes of the real kubelet change nothing a
			// controller reads (its report of the container resources on
			// cgroup v1: one or two per restart, as the kubelet's cgroup
			// reads fall); docs/development/README.md lists them. The simulated
			// node writes none.
			Expect(c.sim.RawWrites).To(Equal(len(c.sim.States)))
		}
		// What the product depends on, said plainly.
		for _, s := range []shape{simulated.WorkerExit, simulated.AgentExit} {
			Expect(s.States[0].Conditions).To(ContainSubstring("AllContainersRestarting=True"))
			Expect(s.States[0].Phase).To(Equal(corev1.PodRunning))
			Expect(s.States[len(s.States)-1].Containers).To(Equal(
				agentContainer + "[running last=terminated(137,RestartingAllContainers) restarts=1 ready=true started=true] " +
					"worker[running last=terminated(137,RestartingAllContainers) restarts=1 ready=true started=true]"))
		}
		Expect(simulated.WorkerExit.States[0].Containers).To(ContainSubstring("worker[terminated(1,Error)"), "the worker's own exit code, in the first write only")
		// A Pod without sidecars: its worker's exit, then the terminal
		// phase with the sandbox's end in one write; the Job controller
		// counts the failure from the second.
		Expect(simLone.States).To(HaveLen(2), "a Pod without sidecars: %s", simLone)
		Expect(simLone.States[1].Phase).To(Equal(corev1.PodFailed))
	})
})
