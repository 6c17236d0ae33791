package realnode

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/util"
)

const timeout = 3 * time.Minute

func workerJobSet(name, ns string, pfp *batchv1.PodFailurePolicy, rules ...jobset.FailurePolicyRule) *jobset.JobSet {
	return util.WorkerJobSet(name, ns, nodes, pfp, rules...)
}

// fatalExitJobSet is Story 2's JobSet: the worker's exit code 3 fails its
// Job (podFailurePolicy FailJob), and that failure fails the JobSet
// (failure policy FailJobSet).
func fatalExitJobSet(name, ns string) *jobset.JobSet {
	fatal := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("worker"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3},
		},
	}}}
	return workerJobSet(name, ns, fatal, jobset.FailurePolicyRule{
		Name: "fatal", Action: jobset.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy},
	})
}

// scopes are the restart scopes every in-place spec runs in.
var scopes = []string{protocol.RestartScopeContainer, protocol.RestartScopeProcess}

// inScopes registers the specs body declares once per restart scope.
func inScopes(body func(scope string)) bool {
	for _, scope := range scopes {
		body(scope)
	}
	return true
}

// expectContainerRestarts checks how often one surviving Pod's workers
// restarted in place: in container scope every container of the Pod
// restarted n times; in process scope none did, and the agent counted n
// worker restarts on the Pod.
func expectContainerRestarts(scope string, p corev1.Pod, n int32) {
	GinkgoHelper()
	perContainer := n
	if scope == protocol.RestartScopeProcess {
		perContainer = 0
		// The agent counts them to the controller, not on its Pod.
		Expect(p.Annotations).NotTo(HaveKey(protocol.WorkerRestartsAnnotation), "pod %s: its agent wrote its Pod", p.Name)
	}
	for _, s := range util.ContainerStatuses(&p) {
		Expect(s.RestartCount).To(Equal(perContainer), "container %s of pod %s", s.Name, p.Name)
	}
}

func podsOf(js *jobset.JobSet) []corev1.Pod { return util.JobSetPods(ctx, k8sClient, js) }

func getJobSet(js *jobset.JobSet) *jobset.JobSet { return util.GetJobSet(ctx, k8sClient, js) }

// expectRunning waits until every worker runs at epoch and returns the
// Pods' identities by name.
func expectRunning(js *jobset.JobSet, epoch int32) map[string]util.PodIdentity {
	GinkgoHelper()
	ids := util.ExpectWorkersRunning(ctx, k8sClient, js, nodes, epoch, timeout)
	if js.Annotations[protocol.RestartScopeAnnotation] == protocol.RestartScopeProcess {
		// The container runs before its worker does: the supervisor holds
		// it behind the barrier. The worker's own log says when it started.
		for _, p := range podsOf(js) {
			Eventually(func() string { return workerLog(p) }).WithTimeout(timeout).
				Should(ContainSubstring(fmt.Sprintf("started pod=%s epoch=%d", p.Name, epoch)), "the worker of %s did not start at epoch %d", p.Name, epoch)
		}
	}
	return ids
}

func exitWorker(pod corev1.Pod, code int) {
	GinkgoHelper()
	util.ExitWorker(ctx, fw.Cluster.Kubeconfig, pod, code)
}

func workerLog(pod corev1.Pod) string {
	GinkgoHelper()
	data, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "worker"}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// agentLog is the log of the agent's current run in pod.
func agentLog(pod corev1.Pod) string {
	GinkgoHelper()
	data, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "inplace-agent"}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// restartWatch records the highest restart count each container of a
// namespace's Pods reached, from every update the apiserver sent, above
// the count it had when the watch began.
type restartWatch struct {
	mu       sync.Mutex
	baseline map[string]int32 // pod/container, at the start
	max      map[string]int32
	// finished are the Pods seen terminal or deleted.
	finished map[string]bool
	stop     func()
}

func watchRestarts(ns string) *restartWatch {
	GinkgoHelper()
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	rw := &restartWatch{baseline: map[string]int32{}, max: map[string]int32{}, finished: map[string]bool{}, stop: w.Stop}
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	for _, p := range pods.Items {
		for _, s := range util.ContainerStatuses(&p) {
			rw.baseline[p.Name+"/"+s.Name] = s.RestartCount
		}
	}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error {
				continue
			}
			rw.mu.Lock()
			for _, s := range util.ContainerStatuses(p) {
				key := p.Name + "/" + s.Name
				rw.max[key] = max(rw.max[key], s.RestartCount)
			}
			if ev.Type == watch.Deleted || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				rw.finished[p.Name] = true
			}
			rw.mu.Unlock()
		}
	}()
	DeferCleanup(w.Stop)
	return rw
}

// seenFinished reports whether the watch saw every one of pods end.
func (rw *restartWatch) seenFinished(pods []string) bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for _, p := range pods {
		if !rw.finished[p] {
			return false
		}
	}
	return true
}

func (rw *restartWatch) restarted() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var out []string
	for k, v := range rw.max {
		if v > rw.baseline[k] {
			out = append(out, fmt.Sprintf("%s: %d (was %d)", k, v, rw.baseline[k]))
		}
	}
	sort.Strings(out)
	return out
}

// specNamespace is a spec's namespace, its default service account ready;
// a failed spec writes its containers' logs first.
func specNamespace() *corev1.Namespace {
	GinkgoHelper()
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			util.DumpContainerLogs(ctx, clientset, ns.Name, 40)
		}
	})
	return ns
}

var _ = inScopes(func(scope string) {
	Describe("in-place restart on real kubelets ("+scope+" scope)", func() {
		var ns *corev1.Namespace
		BeforeEach(func() { ns = specNamespace() })
		workerJobSet := func(name, ns string, pfp *batchv1.PodFailurePolicy, rules ...jobset.FailurePolicyRule) *jobset.JobSet {
			return util.SetRestartScope(workerJobSet(name, ns, pfp, rules...), scope)
		}
		fatalExitJobSet := func(name, ns string) *jobset.JobSet {
			return util.SetRestartScope(fatalExitJobSet(name, ns), scope)
		}

		It("Story 1: a worker exit restarts every Pod in place, and no worker starts before every agent is at the new epoch", func() {
			js := workerJobSet("story1", ns.Name, nil)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			Expect(nodesOf(before)).To(HaveLen(nodes), "one worker Pod per node")

			victim := podsOf(js)[0]
			exitWorker(victim, 1)
			after := expectRunning(js, 2)
			Expect(after).To(Equal(before), "same Pods (UIDs), same IPs, same nodes")

			got := getJobSet(js)
			Expect(got.Status.Restarts).To(Equal(int32(1)))
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
			for _, p := range podsOf(js) {
				expectContainerRestarts(scope, p, 1)
				// The worker's own record: the barrier let it through at the
				// new epoch, which is synced only once every agent reported it.
				Eventually(func() string { return workerLog(p) }).WithTimeout(30*time.Second).
					Should(ContainSubstring(`barrier status=200 body={"lifted":true,"epoch":2}`), "worker log of %s", p.Name)
			}
			if scope == protocol.RestartScopeProcess {
				// The agents stayed up, and their supervisors restarted the
				// workers behind the new epoch's barrier.
				for _, p := range podsOf(js) {
					Expect(agentLog(p)).To(MatchRegexp(`"msg":"epoch deprecated: restarting the workers' processes","from":1,"epoch":2`), "agent log of %s", p.Name)
					Expect(workerLog(p)).To(And(ContainSubstring("inplace-supervisor: barrier of epoch 2 lifted: started the worker"),
						ContainSubstring("started pod="+p.Name+" epoch=2")), "worker log of %s", p.Name)
				}
				Expect(agentLog(victim)).To(MatchRegexp(`"msg":"a worker exited: reporting it","container":"worker","exitCode":1,"epoch":1`))
				return
			}

			// The new agent asked the leader for the epoch it held, 1, and
			// needed no read of its Pod to start epoch 2, except perhaps the
			// agent of the failed worker's Pod, had it started before the
			// epoch was deprecated.
			for _, p := range podsOf(js) {
				Eventually(func() string { return agentLog(p) }).WithTimeout(30*time.Second).
					Should(MatchRegexp(`"msg":"started","epoch":2,`), "agent log of %s", p.Name)
				if p.Name != victim.Name {
					Expect(agentLog(p)).To(MatchRegexp(`"msg":"asked the leader for the epoch it holds","epoch":1,"readPod":false`), "the agent of %s read its Pod", p.Name)
				}
				// The kubelet kept the agent's state volume through the
				// restart: the new agent followed the leader it had been
				// told of, and opened no watch.
				Expect(agentLog(p)).To(ContainSubstring(`"msg":"following the leader's broadcast"`), "the agent of %s watched its broadcast", p.Name)
				Expect(agentLog(p)).NotTo(ContainSubstring("watching the broadcast instead"), "the agent of %s watched its broadcast", p.Name)
			}

		})

		It("Story 2: a fatal exit code fails the JobSet, and no Pod restarts in place", func() {
			js := fatalExitJobSet("story2", ns.Name)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			expectRunning(js, 1)
			var names []string
			for _, p := range podsOf(js) {
				names = append(names, p.Name)
			}
			restarts := watchRestarts(ns.Name)

			exitWorker(podsOf(js)[0], 3)
			got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, "FailJobSetFailurePolicyAction", timeout)
			Expect(got.Status.InPlaceRestarts).To(BeZero(), "the fatal exit started an in-place restart")
			Expect(got.Status.DeprecatedEpoch).To(BeZero(), "an epoch was deprecated for a fatal exit")
			// Until no Pod runs anything (the failed Job's Pod stays, Failed;
			// the others are deleted): a dying Pod's agent that exited with the
			// restart code would restart its Pod in place on the way out.
			Eventually(func() bool { return restarts.seenFinished(names) }).WithTimeout(timeout).Should(BeTrue(), "every Pod seen to end")
			Expect(restarts.restarted()).To(BeEmpty(), "containers restarted after a fatal exit:\n%s", strings.Join(restarts.restarted(), "\n"))
		})

		It("a deleted Pod is replaced, joins, and the others restart in place", func() {
			js := workerJobSet("deleted", ns.Name, nil)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			victim := podsOf(js)[0]
			Expect(k8sClient.Delete(ctx, &victim)).To(Succeed())

			after := expectRunning(js, 2)
			Expect(after).NotTo(HaveKey(victim.Name), "the deleted Pod is back")
			survivors := 0
			for name, id := range after {
				if old, ok := before[name]; ok {
					Expect(id).To(Equal(old), "pod %s restarted in place: same UID and IP", name)
					survivors++
				}
			}
			Expect(survivors).To(Equal(nodes-1), "every Pod but the deleted one restarted in place, none was recreated")
			got := getJobSet(js)
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
			Expect(got.Status.Restarts).To(Equal(int32(1)))
			for _, p := range podsOf(js) {
				if _, survived := before[p.Name]; !survived {
					continue
				}
				expectContainerRestarts(scope, p, 1)
			}
		})

		It("allows exactly maxRestarts in-place restarts, then fails with ReachedMaxRestarts", func() {
			js := workerJobSet("max", ns.Name, nil)
			js.Spec.FailurePolicy.MaxRestarts = 1
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			exitWorker(podsOf(js)[0], 1)
			Expect(expectRunning(js, 2)).To(Equal(before))

			exitWorker(podsOf(js)[1], 1)
			got := util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, "ReachedMaxRestarts", timeout)
			Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
			Expect(got.Status.Restarts).To(Equal(int32(1)))
		})

		// The two ways a JobSet starts in order of readiness: the same
		// barriers, lifted replicated job by replicated job.
		liftsInOrder := func(name string, order func(js *jobset.JobSet)) {
			js := workerJobSet(name, ns.Name, nil)
			driver := js.Spec.ReplicatedJobs[0].DeepCopy()
			driver.Name, driver.Replicas = "driver", 1
			// The driver is Ready only 3 s after its worker starts: under
			// InOrder no worker of "workers" may start before that.
			dw := &driver.Template.Spec.Template.Spec.Containers[0]
			dw.Env = append(dw.Env, corev1.EnvVar{Name: "READY_AFTER_SECONDS", Value: "3"})
			dw.ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{images.WorkerBinary, "ready"}}},
				PeriodSeconds: 1,
			}
			js.Spec.ReplicatedJobs[0].Replicas = nodes - 1
			js.Spec.ReplicatedJobs = append([]jobset.ReplicatedJob{*driver}, js.Spec.ReplicatedJobs...)
			order(js)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			before := expectRunning(js, 1)
			var victim corev1.Pod
			for _, p := range podsOf(js) {
				if p.Labels[jobset.ReplicatedJobNameKey] == "workers" {
					victim = p
				}
			}
			exitWorker(victim, 1)
			Expect(expectRunning(js, 2)).To(Equal(before))

			// The workers' own logs: each started (after the restart) once its
			// barrier lifted at epoch 2, and every worker of "workers" once the
			// driver was Ready, at least 3 s after it started.
			started := map[string][]time.Time{}
			for _, p := range podsOf(js) {
				var at time.Time
				Eventually(func(g Gomega) {
					// The line of the barrier's answer at epoch 2: in process
					// scope the container's log holds every run of its worker,
					// and the supervisor's lines.
					var line string
					for l := range strings.SplitSeq(workerLog(p), "\n") {
						if strings.Contains(l, `"epoch":2}`) {
							line = l
						}
					}
					first := strings.Fields(line)
					g.Expect(first).NotTo(BeEmpty())
					var err error
					at, err = time.Parse(time.RFC3339Nano, first[0])
					g.Expect(err).NotTo(HaveOccurred())
				}).WithTimeout(30 * time.Second).Should(Succeed())
				rj := p.Labels[jobset.ReplicatedJobNameKey]
				started[rj] = append(started[rj], at)
			}
			Expect(started["driver"]).To(HaveLen(1))
			Expect(started["workers"]).To(HaveLen(nodes - 1))
			for _, w := range started["workers"] {
				Expect(w.Sub(started["driver"][0])).To(BeNumerically(">=", 3*time.Second), "a worker of workers started at %v, before the driver (started at %v) could be Ready", w, started["driver"][0])
			}
		}
		It("InOrder: after an in-place restart the barriers lift replicated job by replicated job", func() {
			liftsInOrder("inorder", func(js *jobset.JobSet) {
				js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.InOrder}
			})
		})
		It("dependsOn Ready: after an in-place restart the workers' barriers lift once the driver is Ready", func() {
			liftsInOrder("depends", func(js *jobset.JobSet) {
				workers := &js.Spec.ReplicatedJobs[slices.IndexFunc(js.Spec.ReplicatedJobs, func(rj jobset.ReplicatedJob) bool { return rj.Name == "workers" })]
				workers.DependsOn = []jobset.DependsOn{{Name: "driver", Status: jobset.DependencyReady}}
			})
		})
	})
})
