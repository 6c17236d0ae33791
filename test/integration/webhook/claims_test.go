package webhook

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// A claim <template>-<jobset> that exists when a JobSet is created is used
// as it is: upstream's webhook reads it and refuses a JobSet it
// contradicts, and so does ours.
var _ = Describe("volumeClaimPolicies with a claim that exists", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		Expect(k8sClient.Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-train", Namespace: ns.Name},
			Spec:       sizedClaim("1Gi", corev1.ReadWriteMany),
		})).To(Succeed())
	})

	// claimed is JobSet train mounting a claim template "data" of spec,
	// retained or deleted with the JobSet.
	claimed := func(spec corev1.PersistentVolumeClaimSpec, when jobset.RetentionPolicyType) *jobset.JobSet {
		js := base("train")
		js.Namespace = ns.Name
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{
			Templates:       []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: spec}},
			RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(when)},
		}}
		mount(js, "data")
		return js
	}

	It("admits a JobSet that retains a claim of the template's spec", func() {
		// The API server filled in volumeMode; the template leaves it out.
		expectDecision(k8sClient.Create(ctx, claimed(sizedClaim("1Gi", corev1.ReadWriteMany), jobset.RetentionPolicyRetain)), allowed)
	})

	It("refuses a template whose spec the claim does not have, naming the field", func() {
		expectDecision(k8sClient.Create(ctx, claimed(sizedClaim("1Gi", corev1.ReadWriteOnce), jobset.RetentionPolicyRetain), client.DryRunAll), denied,
			`spec.volumeClaimPolicies[0].templates[0].spec.accessModes: the PersistentVolumeClaim "data-train" exists, and its spec.accessModes is not the template's ["ReadWriteOnce"]`,
			"make the template match the claim (kubectl get pvc data-train -o yaml), or delete the claim")
		spec := sizedClaim("1Gi", corev1.ReadWriteMany)
		spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		expectDecision(k8sClient.Create(ctx, claimed(spec, jobset.RetentionPolicyRetain), client.DryRunAll), denied,
			`spec.volumeClaimPolicies[0].templates[0].spec.volumeMode: the PersistentVolumeClaim "data-train" exists, and its spec.volumeMode is not the template's "Block"`)
	})

	It("refuses a JobSet that would delete the claim with itself", func() {
		expectDecision(k8sClient.Create(ctx, claimed(sizedClaim("1Gi", corev1.ReadWriteMany), jobset.RetentionPolicyDelete), client.DryRunAll), denied,
			`spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: the PersistentVolumeClaim "data-train" of spec.volumeClaimPolicies[0].templates[0] exists already`,
			"set whenDeleted to Retain to use it, or delete the claim")
		// Defaulted to Delete: the same.
		js := claimed(sizedClaim("1Gi", corev1.ReadWriteMany), jobset.RetentionPolicyDelete)
		js.Spec.VolumeClaimPolicies[0].RetentionPolicy = nil
		expectDecision(k8sClient.Create(ctx, js, client.DryRunAll), denied, "spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted")
	})
})

func sizedClaim(size string, modes ...corev1.PersistentVolumeAccessMode) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: modes,
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}
}
