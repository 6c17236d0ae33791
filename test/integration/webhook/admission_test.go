package webhook

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
	"github.com/inplace-dev/inplace/webhook/inject"
)

func loadSpec(file, namespace string) *jobset.JobSet { return util.LoadSpec(file, namespace) }

// withoutAgent removes the agent block of the KEP's manifests.
func withoutAgent(js *jobset.JobSet) *jobset.JobSet {
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.InitContainers = nil
	}
	return js
}

var _ = Describe("the mutating webhook", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	It("stores the in-place restart KEP's Story 1 without its agent block as the full manifest", func() {
		js := withoutAgent(loadSpec("inplace-story1.yaml", ns.Name))
		Expect(k8sClient.Create(ctx, js)).To(Succeed())

		var stored jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &stored)).To(Succeed())
		full := loadSpec("inplace-story1.yaml", ns.Name)
		jobset.Default(full)
		Expect(util.MissingFields(full.Spec, stored.Spec)).To(BeEmpty())
		Expect(stored.Annotations).To(HaveKey(inject.InjectedAnnotation))
	})

	It("injects worker restart rules from the podFailurePolicy (Story 2 without container rules)", func() {
		js := withoutAgent(loadSpec("inplace-story2.yaml", ns.Name))
		for i := range js.Spec.ReplicatedJobs {
			ctr := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers[0]
			ctr.RestartPolicy, ctr.RestartPolicyRules = nil, nil
		}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		var stored jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &stored)).To(Succeed())
		worker := stored.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
		Expect(worker.RestartPolicy).To(Equal(ptr.To(corev1.ContainerRestartPolicyNever)))
		Expect(worker.RestartPolicyRules).To(HaveLen(1))
		Expect(worker.RestartPolicyRules[0].Action).To(Equal(corev1.ContainerRestartRuleActionRestartAllContainers))
		Expect(worker.RestartPolicyRules[0].ExitCodes.Values).To(Equal([]int32{0, 3, 4}))
	})

	It("serves server-side dry-run without storing anything", func() {
		js := withoutAgent(loadSpec("inplace-story1.yaml", ns.Name))
		Expect(k8sClient.Create(ctx, js, client.DryRunAll)).To(Succeed())
		Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers).To(HaveLen(1), "dry-run response carries the mutation")
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "dry-run stored the JobSet: %v", err)
	})

	It("never sees objects outside its scope", func() {
		before := webhookRequests()
		off := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "off-", Labels: map[string]string{"inplace.dev/webhooks": "disabled"}}}
		Expect(k8sClient.Create(ctx, off)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, off)).To(Succeed()) })

		js := wrappers.MakeJobSet("unmutated", off.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		Expect(js.Spec.SuccessPolicy).To(BeNil(), "a JobSet in an opted-out namespace was defaulted by the webhook")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns.Name}}
		Expect(k8sClient.Create(ctx, cm)).To(Succeed())

		Expect(webhookRequests()).To(Equal(before), "the webhooks received requests for objects outside their scope")
	})
})

var _ = Describe("the validating webhook", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	DescribeTable("denies what the specifications call invalid, naming the field and the fix",
		func(file string, edit func(*jobset.JobSet), wantMessages ...string) {
			js := loadSpec(file, ns.Name)
			edit(js)
			err := k8sClient.Create(ctx, js)
			Expect(err).To(HaveOccurred())
			expectInvalid(err)
			for _, m := range wantMessages {
				Expect(err.Error()).To(ContainSubstring(m))
			}
			Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{}))).To(BeTrue(), "a denied JobSet was stored")
		},
		Entry("backoffLimit other than MaxInt32", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
		}, "spec.replicatedJobs[0].template.spec.backoffLimit must be 2147483647", "(got 0)"),
		Entry("podReplacementPolicy other than Failed", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}, "spec.replicatedJobs[0].template.spec.podReplacementPolicy must be Failed"),
		Entry("completions other than parallelism", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](8)
		}, "spec.replicatedJobs[0].template.spec.completions (8) must equal parallelism (4)"),
		Entry("no agent with injection turned off", "inplace-story1.yaml", func(js *jobset.JobSet) {
			withoutAgent(js)
			js.Annotations[inject.OptOutAnnotation] = "false"
		}, "spec.replicatedJobs[0].template.spec.template.spec.initContainers has no agent sidecar"),
		Entry("the KEPs' RestartPod action", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicyRules[0].Action = "RestartPod"
		}, `containers[0].restartPolicyRules[0].action "RestartPod" is not a container restart action: use RestartAllContainers`),
		Entry("the KEPs' Terminate action", "inplace-story2.yaml", func(js *jobset.JobSet) {
			c := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
			c.RestartPolicyRules = append(c.RestartPolicyRules, corev1.ContainerRestartRule{Action: "Terminate",
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: "In", Values: []int32{3, 4}}})
		}, `"Terminate" is not a container restart action: remove the rule`),
		Entry("the KEPs' NoIn operator", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.InitContainers[0].RestartPolicyRules[0].ExitCodes.Operator = "NoIn"
		}, `initContainers[0].restartPolicyRules[0].exitCodes.operator "NoIn" is not an operator: use NotIn`),
		Entry("restart rules on a container without restartPolicy", "inplace-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicy = nil
		}, "containers[0] (worker) has restartPolicyRules but no restartPolicy"),
		Entry("an unknown Job failure reason", "failurepolicy-story1.yaml", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy.Rules[0].OnJobFailureReasons = []string{"OOMKilled"}
		}, `spec.failurePolicy.rules[0].onJobFailureReasons[0] "OOMKilled" is not a Job failure reason`),
		Entry("a target that is not a replicated job", "failurepolicy-story4.yaml", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy.Rules[1].TargetReplicatedJobs = []string{"parameter-servers"}
		}, `spec.failurePolicy.rules[1].targetReplicatedJobs[0] "parameter-servers" names no replicated job`),
		Entry("duplicate rule names", "failurepolicy-story4.yaml", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy.Rules[0].Name, js.Spec.FailurePolicy.Rules[1].Name = "same", "same"
		}, `spec.failurePolicy.rules[1].name "same" is also the name of rules[0]`),
		Entry("an invalid message pattern", "failurepolicy-story2.yaml", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy.Rules[0].OnJobFailureMessagePatterns = []string{"(oops"}
		}, `onJobFailureMessagePatterns[0] "(oops" is not a valid RE2 regular expression`),
		Entry("names too long for the Jobs", "failurepolicy-story4.yaml", func(js *jobset.JobSet) {
			js.Name = "different-policies-for-different-replicated-jobs"
		}, "the Job name", "more than the 63 of a DNS label"),
	)

	It("reports every violation at once", func() {
		js := loadSpec("inplace-story1.yaml", ns.Name)
		js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
		js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](8)
		err := k8sClient.Create(ctx, js)
		Expect(err).To(MatchError(And(ContainSubstring("2 policy violation(s)"), ContainSubstring("backoffLimit"), ContainSubstring("completions (8)"))))
	})

	It("returns warnings to the client", func() {
		warnings := &recordingWarnings{}
		c := clientWithWarnings(warnings)
		js := loadSpec("inplace-story1.yaml", ns.Name) // runs as the default service account
		Expect(c.Create(ctx, js)).To(Succeed())
		Expect(strings.Join(warnings.messages(), "\n")).To(ContainSubstring("the Pods run as the namespace's default service account"))
	})

	It("denies a startup policy change on update", func() {
		js := loadSpec("startup-story1.yaml", ns.Name)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		// A patch, not an update: the controller writes the status
		// meanwhile, and an update from the created version would be
		// refused for that (409) before admission ever saw it.
		patch := client.MergeFrom(js.DeepCopy())
		js.Spec.StartupPolicy.StartupPolicyOrder = jobset.AnyOrder
		err := k8sClient.Patch(ctx, js, patch)
		Expect(err).To(MatchError(ContainSubstring("spec.startupPolicy is immutable")))
	})
})
