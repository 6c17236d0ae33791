package webhook

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

// guardRego denies JobSets named "guarded" only, so that the framework's
// own probe of the webhooks is admitted.
func guardRego(pkg string) string {
	return fmt.Sprintf("package guardrails.%s\n\ndeny contains \"guarded by %s\" if input.object.metadata.name == \"guarded\"\n", pkg, pkg)
}

var _ = Describe("Admission that fails safe", Ordered, func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	It("admits nothing on a starting manager until every policy is in force", func() {
		const n = 40
		for i := range n {
			p := &policyv1alpha1.JobSetPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guard-%02d", i)},
				Spec:       policyv1alpha1.JobSetPolicySpec{Rego: guardRego(fmt.Sprintf("g%02d", i))},
			}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
		}
		for i := range n {
			expectReady(&policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guard-%02d", i)}}, metav1.ConditionTrue)
		}

		fw.StopManager()
		// Ask again and again while the manager starts: the webhook server
		// answers before the policies are compiled, and every answer must
		// be a refusal that carries every policy, or no answer at all.
		type answer struct{ err error }
		answers := make(chan answer, 10000)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := k8sClient.Create(ctx, withMaxRestarts("guarded", ns.Name, 1), client.DryRunAll)
				select {
				case answers <- answer{err}:
				default:
				}
			}
		}()
		fw.StartManager(cfg)
		close(stop)
		<-done
		close(answers)
		denied := 0
		for a := range answers {
			Expect(a.err).To(HaveOccurred(), "a starting manager admitted a JobSet that %d policies deny", n)
			if !strings.Contains(a.err.Error(), "denied the request") || strings.Contains(a.err.Error(), "still loading the JobSetPolicies") {
				continue // not reached, or still loading
			}
			denied++
			for i := range n {
				Expect(a.err.Error()).To(ContainSubstring(fmt.Sprintf("guarded by g%02d", i)), "a starting manager answered without every policy")
			}
		}
		Expect(k8sClient.Create(ctx, withMaxRestarts("guarded", ns.Name, 1), client.DryRunAll)).To(MatchError(ContainSubstring("guarded by g00")))
		GinkgoWriter.Printf("%d denials while the manager started\n", denied)
	})

	It("reads a namespace created a moment ago, rather than skipping the policies that select it", func() {
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "tier-guard"},
			Spec: policyv1alpha1.JobSetPolicySpec{Rego: guardRego("tier"), Match: &policyv1alpha1.Match{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "guarded"}}}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		expectReady(policy, metav1.ConditionTrue)

		var admitted []string
		for range 10 {
			fresh := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fresh-", Labels: map[string]string{"tier": "guarded"}}}
			Expect(k8sClient.Create(ctx, fresh)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, fresh))).To(Succeed()) })
			// At once: the manager's cache may not hold the namespace yet.
			if err := k8sClient.Create(ctx, withMaxRestarts("guarded", fresh.Name, 1), client.DryRunAll); err == nil {
				admitted = append(admitted, fresh.Name)
			} else {
				Expect(err.Error()).To(ContainSubstring("guarded by tier"))
			}
		}
		Expect(admitted).To(BeEmpty(), "admitted in namespaces the policy selects: %s", strings.Join(admitted, ", "))
	})
})

var _ = Describe("Updates under a policy made after the JobSet", func() {
	It("let through what the stored JobSet already violated, and deny what is new", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		js := withMaxRestarts("old", ns.Name, 7)
		js.Spec.Suspend = ptr.To(true)
		js.Finalizers = []string{"example.com/hold"}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())

		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-restarts-later"},
			Spec: policyv1alpha1.JobSetPolicySpec{Rego: maxRestartsRego, Parameters: params(map[string]int{"limit": 2}),
				Match: &policyv1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns.Name}}}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		expectReady(policy, metav1.ConditionTrue)
		Expect(k8sClient.Create(ctx, withMaxRestarts("new", ns.Name, 7), client.DryRunAll)).To(MatchError(ContainSubstring("above this cluster's limit of 2")))

		update := func(edit func(*jobset.JobSet)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur jobset.JobSet
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &cur)).To(Succeed())
				edit(&cur)
				return k8sClient.Update(ctx, &cur)
			})
		}
		// Kueue's unsuspend, with the labels it adds: through, with a warning.
		warnings := &recordingWarnings{}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur jobset.JobSet
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &cur)).To(Succeed())
			cur.Spec.Suspend = ptr.To(false)
			cur.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "q"}
			return clientWithWarnings(warnings).Update(ctx, &cur)
		})).To(Succeed())
		Expect(warnings.messages()).To(ContainElement(ContainSubstring("not enforced on this update, the stored JobSet had the same violation already: max-restarts-later: spec.failurePolicy.maxRestarts is 7")))

		// Deleted: the finalizer's removal goes through.
		Expect(k8sClient.Delete(ctx, js)).To(Succeed())
		Expect(update(func(cur *jobset.JobSet) { cur.Finalizers = nil })).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{}))
		}).WithTimeout(10 * time.Second).Should(BeTrue())
	})
})
