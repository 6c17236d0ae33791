package controller

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("a JobSet in a namespace being deleted", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
	})

	It("is not given its deleted Jobs again", func() {
		// Restarts left: the Jobs whose Pods the namespace controller deletes
		// may fail first, and a failed Job is replaced.
		js := create(wrappers.MakeJobSet("train", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(3).Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 100}).Obj())
		expectJobs(js, "0", "train-workers-0", "train-workers-1", "train-workers-2")
		// The manager's creations in the namespace, of Jobs and of the
		// headless Service, its Events aside.
		creations := func() int {
			n := 0
			for _, w := range fw.ManagerWrites() {
				if strings.HasPrefix(w, "POST ") && strings.Contains(w, "/namespaces/"+ns.Name+"/") && !strings.HasSuffix(w, "/events") {
					n++
				}
			}
			return n
		}
		created := creations()

		// The namespace controller deletes a namespace's objects kind by kind,
		// in no fixed order; holding the JobSet back makes its Jobs go first,
		// as they did for a JobSet of 1,000 Jobs.
		holdJobSetDeletion(ns.Name)
		Expect(k8sClient.Delete(ctx, ns)).To(Succeed())

		refused := func() int { return creations() - created }
		Eventually(func(g Gomega) {
			g.Expect(jobNames(g, js)).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(refused).WithTimeout(timeout).Should(BeNumerically(">", 0),
			"the controller tries to create what was deleted again, and is refused")
		// The first refusal ends it: one reconcile sends at most the Service
		// or the 3 missing Jobs. Each reconcile used to send them all again,
		// its error bringing the next within milliseconds.
		Consistently(refused).WithTimeout(2 * time.Second).Should(BeNumerically("<=", 3))
		Expect(get(js).DeletionTimestamp).To(BeNil(), "the JobSet was held back")
	})
})

// holdJobSetDeletion refuses every deletion of a JobSet in namespace until
// the spec ends, and waits until the API server applies it.
func holdJobSetDeletion(namespace string) {
	GinkgoHelper()
	name := "hold-jobsets-" + namespace
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{jobset.GroupVersion.Group},
							APIVersions: []string{"*"},
							Resources:   []string{"jobsets"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "held by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	})
	// A dry run deletes nothing, and is refused once the policy applies.
	Eventually(func() error {
		return k8sClient.Delete(ctx, &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: namespace}}, client.DryRunAll)
	}).WithTimeout(timeout).Should(MatchError(ContainSubstring("held by the test")))
}
