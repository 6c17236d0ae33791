package upstream

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/webhook/inject"
)

const (
	// examplePods is how many Pods each example runs: 2 Jobs of 2.
	examplePods = 4
	// timeout bounds each wait for what a spec expects.
	timeout = 3 * time.Minute
)

// upstreamExample is one of upstream's examples in ns, unchanged but for
// the agent's image, set to upstream's agent built from its module.
func upstreamExample(file, ns string) *jobset.JobSet {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	js, err := upstreamjobset.Example(root, file, ns)
	Expect(err).NotTo(HaveOccurred())
	return js
}

// agentNamespace is a namespace of its own for one spec (the
// framework's: dumped if the spec fails, deleted after it), with the
// service account and the rights upstream's agent needs.
func agentNamespace() string {
	GinkgoHelper()
	ns := fw.NewNamespace(ctx, k8sClient).Name
	grantUpstreamAgent(ns)
	return ns
}

// grantUpstreamAgent gives ns the service account upstream's examples run
// as, with what upstream's agent calls, once the namespace's default
// service account exists (Pods that run as it are refused until then).
func grantUpstreamAgent(ns string) {
	GinkgoHelper()
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns)
	Expect(upstreamjobset.GrantAgent(ctx, k8sClient, ns)).To(Succeed())
}

func podsOf(js *jobset.JobSet) []corev1.Pod { return util.JobSetPods(ctx, k8sClient, js) }

// expectAttempt waits until the JobSet is at upstream's in-place restart
// attempt, each of its Pods too (their annotation, for those that run
// upstream's agent), with every container started again restarts times
// and running the worker; it returns the Pods' UIDs by name.
func expectAttempt(js *jobset.JobSet, attempt, restarts int32, worker string) map[string]string {
	GinkgoHelper()
	uids := map[string]string{}
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		g.Expect(got.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To(attempt)))
		pods := podsOf(js)
		g.Expect(pods).To(HaveLen(examplePods))
		clear(uids)
		for _, p := range pods {
			g.Expect(p.DeletionTimestamp).To(BeNil())
			if runsUpstreamAgent(p) {
				g.Expect(p.Annotations).To(HaveKeyWithValue(jobset.InPlaceRestartAttemptKey, fmt.Sprint(attempt)), "pod %s", p.Name)
			}
			for _, s := range util.ContainerStatuses(&p) {
				g.Expect(s.RestartCount).To(Equal(restarts), "container %s of pod %s", s.Name, p.Name)
			}
			g.Expect(p.Status.ContainerStatuses).To(ContainElement(And(HaveField("Name", worker), HaveField("State.Running", Not(BeNil())), HaveField("Started", Equal(ptr.To(true))))), "pod %s", p.Name)
			uids[p.Name] = string(p.UID)
		}
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	return uids
}

func runsUpstreamAgent(p corev1.Pod) bool {
	return slices.ContainsFunc(slices.Concat(p.Spec.InitContainers, p.Spec.Containers), func(c corev1.Container) bool {
		return c.Image == images.UpstreamAgentImage
	})
}

// exitIn makes the worker loop of the examples exit with code 1 in one
// container of pod: it exits once /tmp/exit1 exists.
func exitIn(pod corev1.Pod, container string) {
	GinkgoHelper()
	restarts := func(p *corev1.Pod) int32 {
		for _, s := range util.ContainerStatuses(p) {
			if s.Name == container {
				return s.RestartCount
			}
		}
		return -1
	}
	// The baseline is read now: the caller's copy of the Pod may predate
	// earlier restarts.
	var current corev1.Pod
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), &current)).To(Succeed())
	before := restarts(&current)
	out, err := run(30*time.Second, nil, "kubectl", "-n", pod.Namespace, "exec", pod.Name, "-c", container, "--", "touch", "/tmp/exit1")
	if err == nil {
		return
	}
	// The loop looks every second: on a loaded machine it can see the
	// file and exit before the exec's answer is back, and the runtime
	// then kills the exec with the container (exit code 137). What
	// counts is that the container exited: it restarted, or, where the
	// exit ended the JobSet, its Pod is being deleted.
	Eventually(func(g Gomega) {
		var got corev1.Pod
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), &got)
		if apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(restarts(&got)).To(BeNumerically(">", before), "container %s of pod %s exited", container, pod.Name)
	}).WithTimeout(timeout).Should(Succeed(), "touching /tmp/exit1 failed, and the container did not exit: %v\n%s", err, out)
}

func expectFailedAtMaxRestarts(js *jobset.JobSet) {
	GinkgoHelper()
	util.ExpectJobSetCondition(ctx, k8sClient, js, jobset.JobSetFailed, decide.ReasonReachedMaxRestarts, timeout)
}

// restartsEveryPodInPlace runs an example: a worker's exit restarts every
// Pod in place once, the attempts move as upstream's controller moves
// them, and maxRestarts (3 in the examples) holds.
func restartsEveryPodInPlace(js *jobset.JobSet, worker string) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	var stored jobset.JobSet
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &stored)).To(Succeed())
	Expect(stored.Annotations).NotTo(HaveKey(inject.InjectedAnnotation), "the webhook adds no agent beside upstream's")

	before := expectAttempt(js, 0, 0, worker)
	exitIn(podsOf(js)[0], worker)
	Expect(expectAttempt(js, 1, 1, worker)).To(Equal(before), "the same Pods")
	var got jobset.JobSet
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
	Expect(got.Status.PreviousInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
	Expect(got.Status.Restarts).To(Equal(int32(1)))

	for attempt := int32(2); attempt <= got.Spec.FailurePolicy.MaxRestarts; attempt++ {
		exitIn(podsOf(js)[attempt%examplePods], worker)
		Expect(expectAttempt(js, attempt, attempt, worker)).To(Equal(before), "the same Pods")
	}
	exitIn(podsOf(js)[0], worker)
	expectFailedAtMaxRestarts(js)
}

// mixesAgents runs a JobSet whose replicated jobs run upstream's agent
// and inplace's: each one's worker failing restarts every Pod in place.
func mixesAgents() {
	js := upstreamExample(upstreamjobset.SidecarExample, agentNamespace())
	// A second replicated job, the same but for the agent: the
	// webhook gives it inplace's.
	ours := *js.Spec.ReplicatedJobs[0].DeepCopy()
	ours.Name = "ours"
	ours.Replicas = 1
	js.Spec.ReplicatedJobs[0].Replicas = 1
	ours.Template.Spec.Template.Spec.InitContainers = nil
	ours.Template.Spec.Template.Spec.Containers[0].RestartPolicyRules = nil
	js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, ours)
	Expect(k8sClient.Create(ctx, js)).To(Succeed())

	before := expectAttempt(js, 0, 0, "worker")
	pods := podsOf(js)
	Expect(slices.ContainsFunc(pods, runsUpstreamAgent)).To(BeTrue())
	Expect(slices.ContainsFunc(pods, func(p corev1.Pod) bool { return !runsUpstreamAgent(p) })).To(BeTrue(), "the webhook gave the second replicated job inplace's agent")

	for attempt, upstream := range []bool{true, false} {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return runsUpstreamAgent(p) == upstream })
		By(fmt.Sprintf("failing the worker of %s (upstream's agent: %v)", pods[i].Name, upstream))
		exitIn(pods[i], "worker")
		Expect(expectAttempt(js, int32(attempt+1), int32(attempt+1), "worker")).To(Equal(before), "the same Pods")
	}
}
