package api

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var jobsetsGVR = jobsetv1alpha2.GroupVersion.WithResource("jobsets")

var _ = Describe("the JobSet CRD", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
	})

	It("is installed and established, with status subresource and printer columns", func() {
		var crd apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "jobsets.jobset.x-k8s.io"}, &crd)).To(Succeed())
		Expect(crd.Status.Conditions).To(ContainElement(And(
			HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
		Expect(crd.Spec.Versions).To(HaveLen(1))
		v := crd.Spec.Versions[0]
		Expect(v.Name).To(Equal("v1alpha2"))
		Expect(v.Subresources.Status).NotTo(BeNil())
		var columns []string
		for _, c := range v.AdditionalPrinterColumns {
			columns = append(columns, c.Name)
		}
		Expect(columns).To(ContainElements("TerminalState", "Restarts", "Epoch", "Completed", "Age"))
	})

	DescribeTable("round-trips the specifications' manifests without losing a field",
		func(file string) {
			data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "specs", file))
			Expect(err).NotTo(HaveOccurred())
			var want map[string]any
			Expect(yaml.Unmarshal(data, &want)).To(Succeed())
			obj := &unstructured.Unstructured{Object: want}
			obj.SetNamespace(ns.Name)

			created, err := dynamicClient.Resource(jobsetsGVR).Namespace(ns.Name).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			got, err := dynamicClient.Resource(jobsetsGVR).Namespace(ns.Name).Get(ctx, created.GetName(), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())

			Expect(util.MissingFields(obj.Object, got.Object)).To(BeEmpty(),
				"fields of %s that the apiserver dropped or changed", file)
		},
		Entry("in-place restart, Story 1", "inplace-story1.yaml"),
		Entry("in-place restart, Story 2", "inplace-story2.yaml"),
		Entry("KEP-262 Story 1: FailJobSet", "failurepolicy-story1.yaml"),
		Entry("KEP-262 Story 2: RestartJobSet", "failurepolicy-story2.yaml"),
		Entry("KEP-262 Story 3: RestartJobSetAndIgnoreMaxRestarts", "failurepolicy-story3.yaml"),
		Entry("KEP-262 Story 4: per replicated Job policies", "failurepolicy-story4.yaml"),
		Entry("KEP-104 Story 1: driver before workers", "startup-story1.yaml"),
		Entry("KEP-104 Story 2: three in order", "startup-story2.yaml"),
	)

	It("applies the schema defaults", func() {
		js := wrappers.MakeJobSet("defaults", ns.Name).
			ReplicatedJob(jobsetv1alpha2.ReplicatedJob{Name: "w", Template: wrappers.MakeReplicatedJob("w").Obj().Template}).
			FailurePolicy(&jobsetv1alpha2.FailurePolicy{}).
			Obj()
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		Expect(js.Spec.ReplicatedJobs[0].Replicas).To(Equal(int32(1)))
		Expect(js.Spec.ReplicatedJobs[0].GroupName).To(Equal("default"))
		Expect(js.Spec.FailurePolicy.RestartStrategy).To(Equal(jobsetv1alpha2.Recreate))
	})

	DescribeTable("rejects invalid values with a message naming the field",
		func(mutate func(*jobsetv1alpha2.JobSet), wantField, wantDetail string) {
			js := wrappers.MakeJobSet("invalid", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
			mutate(js)
			err := k8sClient.Create(ctx, js)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(And(ContainSubstring(wantField), ContainSubstring(wantDetail)))
		},
		Entry("restartStrategy outside its enum", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{RestartStrategy: "RestartPod"}
		}, "spec.failurePolicy.restartStrategy", `supported values: "Recreate", "BlockingRecreate", "InPlaceRestart"`),
		Entry("failure-policy action outside its enum", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{{Action: "Terminate"}}}
		}, "spec.failurePolicy.rules[0].action", `supported values: "FailJobSet"`),
		Entry("startup order outside its enum", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: "Sequential"}
		}, "spec.startupPolicy.startupPolicyOrder", `supported values: "AnyOrder", "InOrder"`),
		Entry("success operator outside its enum", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: "Most"}
		}, "spec.successPolicy.operator", `supported values: "All", "Any"`),
		// Upstream v0.12.0's schema has no minimum here (compatibility.md).
		Entry("negative replicas", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[0].Replicas = -1
		}, "spec.replicatedJobs[0].replicas", "should be greater than or equal to 0"),
		Entry("negative maxRestarts", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: -1}
		}, "spec.failurePolicy.maxRestarts", "should be greater than or equal to 0"),
		// Upstream keeps the duplicate; ours is a set (compatibility.md).
		Entry("a Job failure reason listed twice", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{{Name: "r", Action: jobsetv1alpha2.FailJobSet,
				OnJobFailureReasons: []string{"BackoffLimitExceeded", "BackoffLimitExceeded"}}}}
		}, "spec.failurePolicy.rules[0].onJobFailureReasons[1]", "Duplicate value"),
		Entry("rule name not matching its pattern", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{Rules: []jobsetv1alpha2.FailurePolicyRule{{Name: "1-bad", Action: jobsetv1alpha2.FailJobSet}}}
		}, "spec.failurePolicy.rules[0].name", "should match"),
		Entry("InOrder together with dependsOn", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.InOrder}
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, wrappers.MakeReplicatedJob("second").DependsOn("w", jobsetv1alpha2.DependencyReady).Obj())
		}, "spec", "mutually exclusive"),
		Entry("dependsOn status outside its enum", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, wrappers.MakeReplicatedJob("second").DependsOn("w", "Started").Obj())
		}, "spec.replicatedJobs[1].dependsOn[0].status", `supported values: "Ready", "Complete"`),
		Entry("no replicated Jobs", func(js *jobsetv1alpha2.JobSet) {
			js.Spec.ReplicatedJobs = nil
		}, "spec", "spec.replicatedJobs must list at least one replicated job"),
	)

	DescribeTable("rejects updates of immutable fields with a message naming the field",
		func(initial, update func(*jobsetv1alpha2.JobSet), wantMessage string) {
			js := wrappers.MakeJobSet("immutable", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
			initial(js)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			update(js)
			err := k8sClient.Update(ctx, js)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry("failurePolicy",
			func(js *jobsetv1alpha2.JobSet) { js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 1} },
			func(js *jobsetv1alpha2.JobSet) { js.Spec.FailurePolicy.MaxRestarts = 2 },
			"spec.failurePolicy is immutable"),
		Entry("startupPolicy",
			func(js *jobsetv1alpha2.JobSet) {
				js.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder}
			},
			func(js *jobsetv1alpha2.JobSet) { js.Spec.StartupPolicy.StartupPolicyOrder = jobsetv1alpha2.InOrder },
			"spec.startupPolicy is immutable"),
		Entry("successPolicy",
			func(js *jobsetv1alpha2.JobSet) {
				js.Spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}
			},
			func(js *jobsetv1alpha2.JobSet) { js.Spec.SuccessPolicy.Operator = jobsetv1alpha2.OperatorAny },
			"spec.successPolicy is immutable"),
		Entry("network",
			func(js *jobsetv1alpha2.JobSet) { js.Spec.Network = &jobsetv1alpha2.Network{Subdomain: "a"} },
			func(js *jobsetv1alpha2.JobSet) { js.Spec.Network.Subdomain = "b" },
			"spec.network is immutable"),
		Entry("managedBy changed",
			func(js *jobsetv1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/a") },
			func(js *jobsetv1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/b") },
			"spec.managedBy is immutable"),
		Entry("managedBy added",
			func(*jobsetv1alpha2.JobSet) {},
			func(js *jobsetv1alpha2.JobSet) { js.Spec.ManagedBy = ptr.To("example.com/b") },
			"spec.managedBy is immutable"),
	)

	It("lets status carry the epoch fields", func() {
		js := wrappers.MakeJobSet("epochs", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		js.Status.DeprecatedEpoch, js.Status.SyncedEpoch = 2, 3
		Expect(k8sClient.Status().Update(ctx, js)).To(Succeed())
		var got jobsetv1alpha2.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(2)))
		Expect(got.Status.SyncedEpoch).To(Equal(int32(3)))
	})
})

var _ = Describe("this kube-apiserver", func() {
	It("accepts and keeps a container restart rule with action RestartAllContainers", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "restart-rules", Namespace: ns.Name},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{
					Name: "worker", Image: "registry.example/worker:1",
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyNever),
					RestartPolicyRules: []corev1.ContainerRestartRule{{
						Action: corev1.ContainerRestartRuleActionRestartAllContainers,
						ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{
							Operator: corev1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0},
						},
					}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		var got corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &got)).To(Succeed())
		Expect(got.Spec.Containers[0].RestartPolicyRules).To(Equal(pod.Spec.Containers[0].RestartPolicyRules),
			"the apiserver dropped restartPolicyRules: are the ContainerRestartRules and RestartAllContainersOnContainerExits gates on?")
	})
})
