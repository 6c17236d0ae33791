package controller

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("volumeClaimPolicies", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// claimPolicy is a policy of one template, ReadWriteMany of 1Gi.
	claimPolicy := func(template string, when jobset.RetentionPolicyType) jobset.VolumeClaimPolicy {
		return jobset.VolumeClaimPolicy{
			Templates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: template, Labels: map[string]string{"tier": template}, Annotations: map[string]string{"note": template}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			RetentionPolicy: &jobset.VolumeRetentionPolicy{WhenDeleted: ptr.To(when)},
		}
	}
	// trainer: replicated job "workers" mounts data in its container, "loader"
	// mounts ckpt in an init container. A mount that no template and no
	// volume provides makes the Job invalid: a spec without one of the
	// templates removes its mount.
	trainer := func(policies ...jobset.VolumeClaimPolicy) *wrappers.JobSetWrapper {
		workers := wrappers.MakeReplicatedJob("workers").Obj()
		workers.Template.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		loader := wrappers.MakeReplicatedJob("loader").Obj()
		loader.Template.Spec.Template.Spec.InitContainers = []corev1.Container{{
			Name: "fetch", Image: "registry.example/fetch:1", VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}},
		}}
		w := wrappers.MakeJobSet("train", ns.Name).ReplicatedJob(workers).ReplicatedJob(loader)
		w.Spec.VolumeClaimPolicies = policies
		return w
	}
	claim := func(name string) *corev1.PersistentVolumeClaim {
		GinkgoHelper()
		var pvc corev1.PersistentVolumeClaim
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, &pvc)).To(Succeed())
		return &pvc
	}
	claimVolume := func(template string) corev1.Volume {
		return corev1.Volume{Name: template, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: template + "-train"}}}
	}
	// posts lists the manager's creations in the namespace, in order.
	posts := func() []string {
		var out []string
		for _, w := range fw.ManagerWrites() {
			if strings.HasPrefix(w, "POST ") && strings.Contains(w, "/namespaces/"+ns.Name+"/") && !strings.HasSuffix(w, "/events") {
				out = append(out, w)
			}
		}
		return out
	}
	claimPosts := func() int {
		return len(slices.DeleteFunc(posts(), func(w string) bool { return !strings.HasSuffix(w, "/persistentvolumeclaims") }))
	}

	It("creates the claims before the Jobs, mounts them where mounted, and deletes only the Delete one with the JobSet", func() {
		js := create(trainer(claimPolicy("data", jobset.RetentionPolicyDelete), claimPolicy("ckpt", jobset.RetentionPolicyRetain)).Obj())
		found := expectJobs(js, "0", "train-workers-0", "train-loader-0")
		uid := get(js).UID

		data, ckpt := claim("data-train"), claim("ckpt-train")
		Expect(data.Labels).To(Equal(map[string]string{"tier": "data", jobset.JobSetNameKey: "train"}))
		Expect(data.Annotations).To(HaveKeyWithValue("note", "data"))
		Expect(data.Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}))
		Expect(data.OwnerReferences).To(ConsistOf(And(
			HaveField("UID", uid), HaveField("Kind", "JobSet"),
			HaveField("Controller", ptr.To(true)), HaveField("BlockOwnerDeletion", ptr.To(true)))))
		Expect(ckpt.Labels).To(Equal(map[string]string{"tier": "ckpt", jobset.JobSetNameKey: "train"}))
		Expect(ckpt.OwnerReferences).To(BeEmpty(), "a retained claim outlives the JobSet")

		// Both claims were sent before the first Job.
		order := posts()
		firstJob := slices.IndexFunc(order, func(w string) bool { return strings.HasSuffix(w, "/jobs") })
		Expect(firstJob).To(BeNumerically(">=", 0))
		Expect(claimPosts()).To(Equal(2))
		Expect(slices.IndexFunc(order[:firstJob], func(w string) bool { return strings.HasSuffix(w, "/persistentvolumeclaims") })).To(BeNumerically(">=", 0))
		Expect(order[firstJob:]).NotTo(ContainElement(HaveSuffix("/persistentvolumeclaims")), "every claim before any Job: %v", order)

		Expect(found["train-workers-0"].Spec.Template.Spec.Volumes).To(Equal([]corev1.Volume{claimVolume("data")}))
		Expect(found["train-loader-0"].Spec.Template.Spec.Volumes).To(Equal([]corev1.Volume{claimVolume("ckpt")}))

		// The reconciles that follow (the Jobs' Pods, their status) find
		// the claims in the cache and send nothing.
		Consistently(claimPosts).WithTimeout(2 * time.Second).Should(Equal(2))

		// The garbage collector runs in this cluster: the Delete claim goes
		// with the JobSet. No pvc-protection controller runs here, so its
		// finalizer keeps it, marked for deletion. The collector learns of
		// the JobSet CRD, installed as the suite starts, at its next
		// discovery pass (every 30 s); an owner deleted before then is
		// found gone when the collector retries it, with growing backoff:
		// when this spec runs first, that takes about a minute.
		Expect(k8sClient.Delete(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "JobSet still there: %v", err)
			g.Expect(jobNames(g, js)).To(BeEmpty())
			var pvc corev1.PersistentVolumeClaim
			err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "data-train"}, &pvc)
			g.Expect(apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil)).To(BeTrue(), "data-train: %v %v", err, pvc.DeletionTimestamp)
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		Expect(claim("ckpt-train").DeletionTimestamp).To(BeNil(), "the retained claim stays")

		// A JobSet of the same name that retains it is admitted and mounts
		// it as it is.
		again := trainer(claimPolicy("ckpt", jobset.RetentionPolicyRetain)).Obj()
		again.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].VolumeMounts = nil
		create(again)
		found = expectJobs(again, "0", "train-workers-0", "train-loader-0")
		Expect(found["train-loader-0"].Spec.Template.Spec.Volumes).To(Equal([]corev1.Volume{claimVolume("ckpt")}))
		Expect(claim("ckpt-train").UID).To(Equal(ckpt.UID))
		Expect(claimPosts()).To(Equal(2), "the existing claim is not created again")
	})

	It("creates the claims of a suspended JobSet with its suspended Jobs", func() {
		js := trainer(claimPolicy("data", jobset.RetentionPolicyDelete)).Suspend(true).Obj()
		js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.InitContainers[0].VolumeMounts = nil
		create(js)
		found := expectJobs(js, "0", "train-workers-0", "train-loader-0")
		for _, j := range found {
			Expect(j.Spec.Suspend).To(Equal(ptr.To(true)), "job %s", j.Name)
		}
		Expect(claim("data-train").OwnerReferences).To(HaveLen(1))
		Expect(found["train-workers-0"].Spec.Template.Spec.Volumes).To(Equal([]corev1.Volume{claimVolume("data")}))
		Expect(found["train-loader-0"].Spec.Template.Spec.Volumes).To(BeEmpty())
	})
})
