package controller

import (
	"cmp"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// These specs play the kubelet of Pods whose agent image cannot be pulled:
// what a node without the image (and no registry to pull it from) writes
// in the Pod's status, through the status subresource.
var _ = Describe("an agent image that cannot be pulled", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// agentOf is the Pod's agent, the init container the webhook injected.
	agentOf := func(pod *corev1.Pod) corev1.Container {
		GinkgoHelper()
		i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool {
			return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == protocol.EnvRestartExitCode })
		})
		Expect(i).To(BeNumerically(">=", 0), "Pod %s has no agent", pod.Name)
		return pod.Spec.InitContainers[i]
	}
	// setAgent writes the agent's state as the kubelet does: waiting, the
	// Pod Pending and its workers not started; or running, and the Pod
	// with it.
	setAgent := func(pod *corev1.Pod, state corev1.ContainerState) {
		GinkgoHelper()
		agent := agentOf(pod)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			pod.Status.Phase = corev1.PodPending
			if state.Running != nil {
				pod.Status.Phase = corev1.PodRunning
			}
			pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: agent.Name, Image: agent.Image, State: state, Started: ptr.To(state.Running != nil)}}
			return k8sClient.Status().Update(ctx, pod)
		})).To(Succeed())
	}
	waiting := func(reason, message string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	}
	imagePullCondition := func(g Gomega, js *jobset.JobSet) string {
		c := meta.FindStatusCondition(get(js).Status.Conditions, string(jobset.JobSetImagePullFailure))
		g.Expect(c).NotTo(BeNil(), "no ImagePullFailure condition")
		return string(c.Status) + " " + c.Reason + " " + c.Message
	}
	agentGauge := func(js *jobset.JobSet) float64 {
		return framework.MetricValue(fw.Metrics(), "inplace_jobset_image_pull_failure", "namespace", js.Namespace, "jobset", js.Name, "container", "agent")
	}
	// imagePullSeries counts the JobSet's series of the metric, which
	// exist only while its condition is True.
	imagePullSeries := func(g Gomega, js *jobset.JobSet) int {
		families, err := fw.Metrics().Gather()
		g.Expect(err).NotTo(HaveOccurred())
		n := 0
		for _, f := range families {
			if f.GetName() != "inplace_jobset_image_pull_failure" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] == js.Namespace && labels["jobset"] == js.Name {
					n++
				}
			}
		}
		return n
	}

	It("says so on the JobSet, once, without failing it, and clears it once the agents run", func() {
		rj := wrappers.MakeReplicatedJob("w").Replicas(1).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(wrappers.MakeJobSet("pull", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		expectJobs(js, "0", "pull-w-0")
		pods := allPods(js, 2)
		image := agentOf(&pods[0]).Image
		slices.SortFunc(pods, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })

		// No registry has the image: the kubelet's first pull fails.
		for i := range pods {
			setAgent(&pods[i], waiting("ErrImagePull", `failed to pull and unpack image "`+image+`": not found`))
		}
		var said string
		Eventually(func(g Gomega) {
			said = imagePullCondition(g, js)
			g.Expect(said).To(And(
				HavePrefix("True AgentImagePullFailed "),
				ContainSubstring(`the agent image "`+image+`" cannot be pulled.`),
				ContainSubstring("agent.image"),
				ContainSubstring("the kubelet keeps retrying"),
				Not(ContainSubstring("ErrImagePull")),
			))
		}).WithTimeout(timeout).Should(Succeed())
		// The Event names the Pods and quotes the kubelet, as they were
		// when the condition turned True: the first Pod, or both.
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Name", js.Name), HaveField("Reason", "AgentImagePullFailed"),
				HaveField("Message", And(
					Or(ContainSubstring("1 Pod waits for it ("+pods[0].Name+")"), ContainSubstring("2 Pods wait for it ("+pods[0].Name+", "+pods[1].Name+")")),
					ContainSubstring("Pod "+pods[0].Name+": ErrImagePull: failed to pull and unpack image"),
					ContainSubstring("service account default"),
				)))))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func() float64 { return agentGauge(js) }).WithTimeout(timeout).Should(Equal(1.0))
		Expect(imagePullSeries(Default, js)).To(Equal(1), "a worker series besides the agent's")

		// The kubelet backs off and retries, and says so in other words:
		// the condition stays as it is, unwritten, and the JobSet neither
		// fails nor restarts.
		statusWrites := func() int { return managerWrites("PUT", "/namespaces/"+ns.Name+"/jobsets/"+js.Name+"/status") }
		written := statusWrites()
		for i := range pods {
			setAgent(&pods[i], waiting("ImagePullBackOff", `Back-off pulling image "`+image+`"`))
		}
		Consistently(func(g Gomega) {
			g.Expect(imagePullCondition(g, js)).To(Equal(said))
			g.Expect(statusWrites()).To(Equal(written), "the JobSet's status was written for the kubelet's back-off")
		}).WithTimeout(shortWait).Should(Succeed())
		got := get(js)
		Expect(got.Status.TerminalState).To(BeEmpty())
		Expect(got.Status.Restarts).To(BeZero())

		// The image is there now: the agents run, and the condition clears.
		for i := range pods {
			setAgent(&pods[i], corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
		}
		expectCondition(js, jobset.JobSetImagePullFailure, "False", "ImagePullResolved")
		expectEvent(js, "ImagePullResolved")
		// The series is gone with the condition.
		Eventually(func(g Gomega) int { return imagePullSeries(g, js) }).WithTimeout(timeout).Should(BeZero())

		// One Warning for the whole episode, however often the kubelet's
		// words changed.
		var events corev1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
		warnings := 0
		for _, e := range events.Items {
			if e.Reason == "AgentImagePullFailed" && e.InvolvedObject.Name == js.Name {
				warnings++
				Expect(e.Type).To(Equal(corev1.EventTypeWarning))
				Expect(e.Series == nil || e.Series.Count <= 1).To(BeTrue(), "the Event was recorded again: %+v", e.Series)
			}
		}
		Expect(warnings).To(Equal(1))

		// The agents report and the group syncs as on any first start.
		reportEpoch(js, 2, "1")
		Eventually(func() int32 { return get(js).Status.SyncedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
	})
})
