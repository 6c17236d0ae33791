package realnode

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// upstreamJobSet is a JobSet written for upstream JobSet's in-place
// restart agent in sidecar mode, as upstream's examples show it: the
// agent's own service account, container, environment, probe and restart
// rules, and the Job settings written out. The agent is inplace-agent,
// given upstream's environment and none of the webhook's: inplace-agent
// speaks upstream's protocol then (cmd/agent, agent.UpstreamTransport).
// Upstream's own agent runs in test/e2e/upstream.
func upstreamJobSet(name, ns, serviceAccount string) *jobset.JobSet {
	restartAll := []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}},
	}}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	rj := wrappers.MakeReplicatedJob("workers").Replicas(int32(nodes)).Obj()
	job := &rj.Template.Spec
	job.Parallelism, job.Completions = ptr.To[int32](1), ptr.To[int32](1)
	job.BackoffLimit = ptr.To[int32](2147483647)
	job.PodReplacementPolicy = ptr.To(batchv1.Failed)
	pod := &job.Template.Spec
	pod.ServiceAccountName = serviceAccount
	pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
	pod.InitContainers = []corev1.Container{{
		Name:               "in-place-restart-agent",
		Image:              images.Agent,
		RestartPolicy:      ptr.To(corev1.ContainerRestartPolicyAlways),
		RestartPolicyRules: restartAll,
		Env:                []corev1.EnvVar{fieldEnv("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"), fieldEnv("POD_NAME", "metadata.name")},
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/barrier-is-down", Port: intstr.FromInt32(8081)}},
			FailureThreshold: 600, PeriodSeconds: 1,
		},
	}}
	pod.Containers[0].Image = images.Worker
	pod.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	pod.Containers[0].RestartPolicyRules = restartAll
	pod.Containers[0].Env = []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), {Name: "BARRIER_URL", Value: "http://127.0.0.1:8081/barrier-is-down"}}
	return wrappers.MakeJobSet(name, ns).ReplicatedJob(rj).
		FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobset.InPlaceRestart}).Obj()
}

var _ = Describe("inplace-agent given upstream's environment, on real kubelets", func() {
	It("gets its barrier lifted and its Pod restarted in place, under upstream's names, with nothing injected beside it", func() {
		ns := specNamespace()
		// Upstream's RBAC for its agent: read JobSets, patch Pods.
		const sa = "jobset-in-place-restart"
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns.Name}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns.Name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{jobset.GroupVersion.Group}, Resources: []string{"jobsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"}},
		}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns.Name}},
		})).To(Succeed())

		js := upstreamJobSet("upstream", ns.Name, sa)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		stored := getJobSet(js)
		podSpec := stored.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
		Expect(podSpec.InitContainers).To(HaveLen(1), "the webhook added an agent beside upstream's")
		Expect(stored.Annotations).NotTo(HaveKey("inplace.dev/injected"))

		before := expectRunning(js, 1)
		Expect(nodesOf(before)).To(HaveLen(nodes), "one worker Pod per node")
		got := getJobSet(js)
		Expect(got.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)), "upstream's first attempt is 0")
		for _, p := range podsOf(js) {
			Expect(p.Annotations).To(HaveKeyWithValue(jobset.InPlaceRestartAttemptKey, "0"), "pod %s", p.Name)
			Expect(p.Annotations).NotTo(HaveKey(jobset.EpochKey), "pod %s", p.Name)
		}

		exitWorker(podsOf(js)[0], 1)
		after := expectRunning(js, 2)
		Expect(after).To(Equal(before), "same Pods (UIDs), same IPs, same nodes")
		got = getJobSet(js)
		Expect(got.Status.CurrentInPlaceRestartAttempt).To(Equal(ptr.To[int32](1)))
		Expect(got.Status.PreviousInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		for _, p := range podsOf(js) {
			Expect(p.Annotations).To(HaveKeyWithValue(jobset.InPlaceRestartAttemptKey, "1"), "pod %s", p.Name)
			for _, s := range util.ContainerStatuses(&p) {
				Expect(s.RestartCount).To(Equal(int32(1)), "container %s of pod %s restarted once", s.Name, p.Name)
			}
			Eventually(func() string { return workerLog(p) }).WithTimeout(30*time.Second).
				Should(ContainSubstring(`barrier status=200`), "worker log of %s", p.Name)
		}
	})
})
