package webhook

import (
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// The decisions of upstream JobSet's webhook and CRD on upstream's own
// cases, through this apiserver, the CRD and both webhooks; where this
// project decides otherwise on purpose, the entry says so and
// docs/reference/compatibility.md says why.

func rjob(name string) *wrappers.ReplicatedJobWrapper { return wrappers.MakeReplicatedJob(name) }

// base is a JobSet upstream admits: 2 Jobs of 4 Pods.
func base(name string) *jobset.JobSet {
	return wrappers.MakeJobSet(name, "").ReplicatedJob(rjob("workers").Replicas(2).Parallelism(4).Obj()).Obj()
}

func podSpec(js *jobset.JobSet, i int) *corev1.PodSpec {
	return &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
}

func claimPolicy(names ...string) jobset.VolumeClaimPolicy {
	var p jobset.VolumeClaimPolicy
	for _, n := range names {
		p.Templates = append(p.Templates, corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
		})
	}
	return p
}

func mount(js *jobset.JobSet, name string) {
	podSpec(js, 0).Containers[0].VolumeMounts = append(podSpec(js, 0).Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/" + name})
}

// expectDecision asserts the decision and, for a denial, that the message
// names every wanted part (the field, the fix).
func expectDecision(err error, allowed bool, want ...string) {
	GinkgoHelper()
	if allowed {
		Expect(err).NotTo(HaveOccurred())
		return
	}
	Expect(err).To(HaveOccurred(), "upstream refuses this JobSet; it was admitted")
	expectInvalid(err)
	for _, w := range want {
		Expect(err.Error()).To(ContainSubstring(w))
	}
}

// expectInvalid asserts a refusal as upstream JobSet and the API server
// answer an invalid object: Invalid (422), its causes naming the fields.
func expectInvalid(err error) {
	GinkgoHelper()
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid (422), as upstream answers, got %v", err)
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue())
	Expect(status.Status().Details).NotTo(BeNil(), "an Invalid refusal without details: %v", err)
	Expect(status.Status().Details.Causes).To(ContainElement(HaveField("Field", Not(BeEmpty()))), "no cause names a field: %v", err)
}

const (
	allowed = true
	denied  = false
)

var _ = Describe("compatibility with upstream JobSet", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	DescribeTable("decides creates as upstream does",
		func(name string, edit func(*jobset.JobSet), decision bool, want ...string) {
			js := base(name)
			js.Namespace = ns.Name
			edit(js)
			expectDecision(k8sClient.Create(ctx, js, client.DryRunAll), decision, want...)
		},
		// coordinator
		Entry("a coordinator in a replicated job that does not exist", "coord", func(js *jobset.JobSet) {
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "leader"}
		}, denied, `spec.coordinator.replicatedJob "leader" names no replicated job: use one of ["workers"]`),
		Entry("a coordinator Job index out of range", "coord", func(js *jobset.JobSet) {
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 2}
		}, denied, "spec.coordinator.jobIndex 2 is out of range", "(indexes 0 to 1)"),
		Entry("a coordinator Pod index out of range", "coord", func(js *jobset.JobSet) {
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", PodIndex: 4}
		}, denied, "spec.coordinator.podIndex 4 is out of range", "(indexes 0 to 3)"),
		Entry("a coordinator in a NonIndexed Job", "coord", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers"}
		}, denied, "spec.coordinator.replicatedJob workers must have Indexed Jobs with completions set"),
		Entry("a coordinator whose endpoint is too long for a label value", "a-jobset-name-long-enough-to-overflow", func(js *jobset.JobSet) {
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers"}
		}, denied, "spec.coordinator: the coordinator endpoint", "shorten metadata.name, spec.coordinator.replicatedJob or spec.network.subdomain"),
		Entry("a valid coordinator", "coord", func(js *jobset.JobSet) {
			js.Spec.Coordinator = &jobset.Coordinator{ReplicatedJob: "workers", JobIndex: 1, PodIndex: 3}
		}, allowed),
		// generated names
		Entry("a dot in the JobSet's name", "train.v2", func(*jobset.JobSet) {},
			denied, `metadata.name "train.v2" contains '.'`, "use '-' instead of '.'"),
		Entry("a JobSet name starting with a digit", "1train", func(*jobset.JobSet) {},
			denied, `metadata.name "1train" starts with "1"`),
		Entry("upper case in a replicated job's name", "train", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "Workers" },
			denied, `spec.replicatedJobs[0].name "Workers" is part of the names of its Jobs and Pods`),
		Entry("an underscore in a replicated job's name", "train", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].Name = "the_workers" },
			denied, `spec.replicatedJobs[0].name "the_workers"`, "use only lower-case letters, digits and '-'"),
		Entry("Job names longer than a DNS label", "different-policies-for-different-replicated-jobs", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Name = "parameter-server"
		}, denied, "spec.replicatedJobs[0].name: the Job name", "shorten metadata.name or spec.replicatedJobs[0].name by 4"),
		Entry("Pod hostnames longer than a DNS label", "different-policies-for-different-replicated-jobs", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Name = "paramserver"
		}, denied, "spec.replicatedJobs[0].name: the Pod hostname", "by 1"),
		Entry("Pod hostnames of 63 characters (upstream refuses: it budgets a Pod name suffix the API server cuts anyway)", "different-policies-for-different-replicated-jobs", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Name = "paramserve"
		}, allowed),
		Entry("a generateName whose Jobs' names may be too long", "", func(js *jobset.JobSet) {
			js.GenerateName = "different-policies-for-different-replicated-jobs-"
			js.Spec.ReplicatedJobs[0].Name = "paramserver"
		}, denied, "shorten metadata.generateName or spec.replicatedJobs[0].name"),
		Entry("a subdomain that is not a DNS label", "train", func(js *jobset.JobSet) {
			js.Spec.Network = &jobset.Network{Subdomain: "my.subdomain"}
		}, denied, `spec.network.subdomain "my.subdomain" must be a DNS-1035 label`, "it names the headless Service"),
		Entry("a subdomain longer than 63", "train", func(js *jobset.JobSet) {
			js.Spec.Network = &jobset.Network{Subdomain: strings.Repeat("a", 64)}
		}, denied, "spec.network.subdomain", "at most 63"),
		Entry("a group name that is not a DNS-1035 label", "train", func(js *jobset.JobSet) { js.Spec.ReplicatedJobs[0].GroupName = "Group_1" },
			denied, `spec.replicatedJobs[0].groupName "Group_1" must be a DNS-1035 label`),
		Entry("a managedBy that is not a domain-prefixed path", "train", func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("kueue") },
			denied, `spec.managedBy "kueue" must be a domain-prefixed path such as example.com/my-controller`),
		Entry("a managedBy that is a domain-prefixed path", "train", func(js *jobset.JobSet) { js.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") },
			allowed),
		// references
		Entry("a success policy targeting no replicated job", "train", func(js *jobset.JobSet) {
			js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAll, TargetReplicatedJobs: []string{"leader"}}
		}, denied, `spec.successPolicy.targetReplicatedJobs[0] "leader" names no replicated job: use one of ["workers"]`),
		Entry("dependsOn with two entries", "train", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs = []jobset.ReplicatedJob{rjob("a").Obj(), rjob("b").Obj(),
				rjob("c").DependsOn("a", jobset.DependencyComplete).DependsOn("b", jobset.DependencyReady).Obj()}
		}, allowed),
		Entry("dependsOn with six entries", "train", func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs = nil
			last := rjob("g")
			for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rjob(n).Obj())
				last.DependsOn(n, jobset.DependencyReady)
			}
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, last.Obj())
		}, denied, "spec.replicatedJobs[6].dependsOn", "must have at most 5 items"),
		// volumeClaimPolicies
		Entry("volumeClaimPolicies with a mounted claim", "train", func(js *jobset.JobSet) {
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{claimPolicy("data")}
			mount(js, "data")
		}, allowed),
		Entry("a claim template no container mounts", "train", func(js *jobset.JobSet) {
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{claimPolicy("data")}
		}, denied, `spec.volumeClaimPolicies[0].templates[0].metadata.name "data" is mounted by no container`),
		Entry("a claim template named like a volume of the Pod template", "train", func(js *jobset.JobSet) {
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{claimPolicy("data")}
			mount(js, "data")
			podSpec(js, 0).Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, denied, `spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name "data" is also the name of the claim template`),
		Entry("two claim templates of one name", "train", func(js *jobset.JobSet) {
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{claimPolicy("data"), claimPolicy("data")}
			mount(js, "data")
		}, denied, `spec.volumeClaimPolicies[1].templates[0].metadata.name "data" is also the name of spec.volumeClaimPolicies[0].templates[0]`),
		Entry("a claim template with a namespace", "train", func(js *jobset.JobSet) {
			p := claimPolicy("data")
			p.Templates[0].Namespace = "other"
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{p}
			mount(js, "data")
		}, denied, "spec.volumeClaimPolicies[].templates[].metadata.namespace must not be set"),
		Entry("a retention policy outside its enum", "train", func(js *jobset.JobSet) {
			p := claimPolicy("data")
			p.RetentionPolicy = &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To[jobset.RetentionPolicyType]("Keep")}
			js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{p}
			mount(js, "data")
		}, denied, "spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted", `supported values: "Delete", "Retain"`),
	)

	It("refuses a JobSet without replicated jobs, saying what is missing (upstream admits it)", func() {
		js := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
			"metadata": map[string]any{"name": "empty", "namespace": ns.Name},
			"spec":     map[string]any{},
		}}
		expectDecision(k8sClient.Create(ctx, js, client.DryRunAll), denied, "spec.replicatedJobs must list at least one replicated job", "add a replicated job")
	})

	It("defaults volumeClaimPolicies as upstream does, without a warning", func() {
		warnings := &recordingWarnings{}
		js := base("claims")
		js.Namespace = ns.Name
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{claimPolicy("data")}
		mount(js, "data")
		Expect(clientWithWarnings(warnings).Create(ctx, js, client.DryRunAll)).To(Succeed())
		Expect(js.Spec.VolumeClaimPolicies[0].RetentionPolicy).To(Equal(&jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(jobset.RetentionPolicyDelete)}))
		Expect(warnings.messages()).To(BeEmpty())
	})

	DescribeTable("decides updates as upstream does",
		func(suspended bool, edit func(*jobset.JobSet), decision bool, want ...string) {
			js := base("update")
			js.Namespace = ns.Name
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rjob("ps").Obj())
			js.Spec.Suspend = ptr.To(suspended)
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			// A merge patch without a resourceVersion: the controller
			// writes the status meanwhile.
			patch := client.MergeFrom(js.DeepCopy())
			edit(js)
			expectDecision(k8sClient.Patch(ctx, js, patch, client.DryRunAll), decision, want...)
		},
		Entry("the Pod template's Kueue fields of a suspended JobSet", true, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "q"}
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/workload": "w"}
			podSpec(js, 0).NodeSelector = map[string]string{"pool": "a"}
			podSpec(js, 0).Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			podSpec(js, 0).SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue"}}
		}, allowed),
		Entry("a nodeSelector while resuming", true, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(false)
			podSpec(js, 0).NodeSelector = map[string]string{"pool": "a"}
		}, allowed),
		Entry("a nodeSelector while suspending", false, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(true)
			podSpec(js, 0).NodeSelector = map[string]string{"pool": "a"}
		}, allowed),
		Entry("a nodeSelector of a running JobSet", false, func(js *jobset.JobSet) {
			podSpec(js, 0).NodeSelector = map[string]string{"pool": "a"}
		}, denied, "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector can change only while the JobSet is suspended", "set spec.suspend to true"),
		Entry("Pod template labels of a running JobSet", false, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels = map[string]string{"a": "b"}
		}, denied, "spec.replicatedJobs[1].template.spec.template.metadata.labels can change only while the JobSet is suspended"),
		Entry("a container's image of a suspended JobSet", true, func(js *jobset.JobSet) {
			podSpec(js, 0).Containers[0].Image = "registry.example/worker:2"
		}, denied, "spec.replicatedJobs[0].template.spec.template.spec.containers is immutable", "delete and recreate the JobSet"),
		Entry("the replicas of a suspended JobSet", true, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[0].Replicas = 3
		}, denied, "spec.replicatedJobs[0].replicas is immutable"),
		Entry("a replicated job added", true, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rjob("extra").Obj())
		}, denied, "spec.replicatedJobs[2] (extra) is new: replicated jobs cannot be added"),
		Entry("a replicated job removed", true, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs = js.Spec.ReplicatedJobs[:1]
		}, denied, "spec.replicatedJobs: ps was removed or renamed"),
		Entry("a replicated job renamed", true, func(js *jobset.JobSet) {
			js.Spec.ReplicatedJobs[1].Name = "parameter-server"
		}, denied, "spec.replicatedJobs[1] (parameter-server) is new", "spec.replicatedJobs: ps was removed or renamed"),
		Entry("suspend itself", false, func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) }, allowed),
	)

	It("takes kubectl replace of the manifest as written: the webhook restores what it added on create", func() {
		written := func() *jobset.JobSet { return withoutAgent(loadSpec("inplace-story1.yaml", ns.Name)) }
		Expect(k8sClient.Create(ctx, written())).To(Succeed())
		var stored jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(written()), &stored)).To(Succeed())

		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var current jobset.JobSet
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&stored), &current)).To(Succeed())
			replace := written()
			replace.ResourceVersion = current.ResourceVersion
			return k8sClient.Update(ctx, replace)
		})).To(Succeed())

		var after jobset.JobSet
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&stored), &after)).To(Succeed())
		Expect(after.Generation).To(Equal(stored.Generation), "the replace changed the spec")
		Expect(after.Spec).To(Equal(stored.Spec))
	})

	It("keeps the generation when the same manifest is applied twice server-side", func() {
		js := base("applied")
		js.Namespace = ns.Name
		js.TypeMeta = metav1.TypeMeta{APIVersion: jobset.GroupVersion.String(), Kind: "JobSet"}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
		Expect(err).NotTo(HaveOccurred())
		delete(obj, "status")
		unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
		apply := func() int64 {
			GinkgoHelper()
			u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("compat-test"), client.ForceOwnership)).To(Succeed())
			var got jobset.JobSet
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), &got)).To(Succeed())
			return got.Generation
		}
		first := apply()
		Expect(apply()).To(Equal(first), "a second apply of the same manifest changed the spec")
	})
})
