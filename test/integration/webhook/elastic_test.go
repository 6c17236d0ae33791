package webhook

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Elastic replicated jobs (upstream's ElasticJobSet, always on here): the
// update pairs upstream's webhook decides, through this apiserver, the CRD
// and both webhooks.
var _ = Describe("elastic replicated jobs", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	resize := func(js *jobset.JobSet, parallelism, completions int32) {
		js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To(parallelism)
		js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To(completions)
	}

	DescribeTable("decides a scale as upstream does",
		func(setup func(*jobset.JobSet), finished bool, edit func(*jobset.JobSet), decision bool, want ...string) {
			js := base("elastic")
			js.Namespace = ns.Name
			if setup != nil {
				setup(js)
			}
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			if finished {
				Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
					Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
					meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done"})
					return k8sClient.Status().Update(ctx, js)
				})).To(Succeed())
			}
			patch := client.MergeFrom(js.DeepCopy())
			edit(js)
			expectDecision(k8sClient.Patch(ctx, js, patch, client.DryRunAll), decision, want...)
		},
		Entry("parallelism and completions of a running Indexed replicated job", nil, false,
			func(js *jobset.JobSet) { resize(js, 6, 6) }, allowed),
		Entry("scaled down to 1", nil, false,
			func(js *jobset.JobSet) { resize(js, 1, 1) }, allowed),
		Entry("scaled below 1", nil, false,
			func(js *jobset.JobSet) { resize(js, 0, 0) },
			denied, "spec.replicatedJobs[0].template.spec.parallelism must be at least 1 to scale a replicated job (got 0)"),
		Entry("completions other than parallelism", nil, false,
			func(js *jobset.JobSet) { resize(js, 6, 4) },
			denied, "spec.replicatedJobs[0].template.spec.completions (4) must equal parallelism (6) to scale a replicated job", "set both"),
		Entry("a finished JobSet", nil, true,
			func(js *jobset.JobSet) { resize(js, 6, 6) },
			denied, "spec.replicatedJobs[0].template.spec.parallelism: cannot change parallelism or completions of a finished JobSet"),
		Entry("a NonIndexed replicated job", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
		}, false,
			func(js *jobset.JobSet) { resize(js, 6, 6) },
			denied, "spec.replicatedJobs[0].template.spec.parallelism is immutable"),
		Entry("replicas changed with the scale", nil, false,
			func(js *jobset.JobSet) {
				resize(js, 6, 6)
				js.Spec.ReplicatedJobs[0].Replicas = 3
			},
			denied, "spec.replicatedJobs[0].replicas is immutable"),
		Entry("an InPlaceRestart replicated job, completions left out (set by the webhook on create)", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}
			js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = nil
			js.Spec.ReplicatedJobs[0].Template.Spec.Completions = nil
		}, false,
			func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](6)
				js.Spec.ReplicatedJobs[0].Template.Spec.Completions = nil
			}, allowed),
		Entry("an InPlaceRestart replicated job, completions other than parallelism", func(js *jobset.JobSet) {
			js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}
			js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = nil
		}, false,
			func(js *jobset.JobSet) { resize(js, 6, 4) },
			denied, "completions (4) must equal parallelism (6)"),
	)

	It("stores an InPlaceRestart scale whose request leaves completions out with completions equal to parallelism", func() {
		js := base("replace")
		js.Namespace = ns.Name
		js.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}
		js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = nil
		js.Spec.ReplicatedJobs[0].Template.Spec.Completions = nil
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		patch := client.MergeFrom(js.DeepCopy())
		js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](6)
		js.Spec.ReplicatedJobs[0].Template.Spec.Completions = nil
		Expect(k8sClient.Patch(ctx, js, patch)).To(Succeed())
		Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism).To(Equal(ptr.To[int32](6)))
		Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Completions).To(Equal(ptr.To[int32](6)))
	})
})
