package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("Pod priority", func() {
	It("labels every Pod with the priority the API server gives it, and keeps exclusive Jobs apart within it", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-" + ns.Name}, Value: 1000}
		Expect(k8sClient.Create(ctx, high)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, high))).To(Succeed()) })

		urgent := wrappers.MakeReplicatedJob("urgent").Parallelism(2).Obj()
		urgent.Template.Spec.Template.Spec.PriorityClassName = high.Name
		js := create(wrappers.MakeJobSet("prio", ns.Name).Annotation(jobset.ExclusiveKey, corev1.LabelHostname).
			ReplicatedJob(urgent).
			ReplicatedJob(wrappers.MakeReplicatedJob("plain").Obj()).
			Obj())
		found := expectJobs(js, "0", "prio-plain-0", "prio-urgent-0")

		for name, want := range map[string]string{"prio-urgent-0": "1000", "prio-plain-0": "0"} {
			job := found[name]
			Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(jobset.PriorityKey, want), "Job %s", name)
			terms := job.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			Expect(terms).To(HaveLen(2))
			Expect(terms[0].LabelSelector.MatchExpressions).To(ContainElement(metav1.LabelSelectorRequirement{
				Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpIn, Values: []string{want},
			}), "Job %s is kept apart from the Pods of its priority", name)
			Expect(terms[1].LabelSelector.MatchExpressions).To(ContainElement(metav1.LabelSelectorRequirement{
				Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpDoesNotExist,
			}), "Job %s is kept apart from the Pods without a priority", name)
			// The label is the priority the API server gave the Pods.
			Eventually(func(g Gomega) {
				pods := util.JobPods(ctx, k8sClient, ns.Name, name)
				g.Expect(pods).NotTo(BeEmpty())
				for _, p := range pods {
					g.Expect(p.Spec.Priority).NotTo(BeNil())
					g.Expect(p.Labels).To(HaveKeyWithValue(jobset.PriorityKey, want))
					g.Expect(p.Labels[jobset.PriorityKey]).To(Equal(itoa(*p.Spec.Priority)))
				}
			}).WithTimeout(timeout).Should(Succeed())
		}
	})
})
