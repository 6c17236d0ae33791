package webhook

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

// withoutPolicyWebhook runs fn with the JobSetPolicy webhook taken out of
// the validating configuration, as on a cluster where policies were stored
// before it was installed, and puts it back. The apiserver learns of each
// change within moments: fn retries what the webhook would refuse.
func withoutPolicyWebhook(fn func()) {
	GinkgoHelper()
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "inplace-validating-webhook"}, &cfg)).To(Succeed())
	saved := cfg.DeepCopy()
	cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == "vjobsetpolicy.inplace.dev" })
	Expect(cfg.Webhooks).To(HaveLen(len(saved.Webhooks)-1), "no JobSetPolicy webhook to take out")
	Expect(k8sClient.Update(ctx, &cfg)).To(Succeed())
	// The API server's webhooks follow their configuration a moment
	// later: out of force once an empty policy, which the webhook refuses,
	// is admitted.
	Eventually(func() error {
		return k8sClient.Create(ctx, &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe-empty"}, Spec: policyv1alpha1.JobSetPolicySpec{Rego: "package probe\n"}}, client.DryRunAll)
	}).WithTimeout(10*time.Second).Should(Succeed(), "the JobSetPolicy webhook is still in force")
	defer func() {
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "inplace-validating-webhook"}, &cfg)).To(Succeed())
		cfg.Webhooks = saved.Webhooks
		Expect(k8sClient.Update(ctx, &cfg)).To(Succeed())
		// Back in force: an empty policy is refused again.
		Eventually(func() error {
			return k8sClient.Create(ctx, &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe-empty"}, Spec: policyv1alpha1.JobSetPolicySpec{Rego: "package probe\n"}}, client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("enforce nothing")))
	}()
	fn()
}

var _ = Describe("The JobSetPolicy webhook", func() {
	DescribeTable("refuses a policy that would not be in force, naming why",
		func(rego, want string) {
			p := &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refused"}, Spec: policyv1alpha1.JobSetPolicySpec{Rego: rego}}
			Expect(k8sClient.Create(ctx, p)).To(MatchError(And(
				ContainSubstring("the policy would not be in force: spec.rego: "), ContainSubstring(want))))
		},
		Entry("a syntax error", "package p\n\ndeny contains msg if {\n\tmsg := \n}\n", "refused.rego:5"),
		Entry("a denied builtin", "package p\n\ndeny contains msg if {\n\tmsg := sprintf(\"%d\", [time.now_ns()])\n}\n", "time.now_ns is not allowed in a policy"),
		Entry("no rule", "package p\n\nallow if true\n", "defines no deny, violation, warn or patch rule"),
		Entry("strict mode", "package p\n\ndeny contains \"x\" if {\n\tunused := 1\n\ttrue\n}\n", "refused.rego:4"),
	)

	It("never blocks an update that leaves the spec alone", func() {
		var p *policyv1alpha1.JobSetPolicy
		withoutPolicyWebhook(func() {
			p = &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "stored-broken", Finalizers: []string{"example.com/keep"}},
				Spec: policyv1alpha1.JobSetPolicySpec{Rego: "package p\n"}}
			Eventually(func() error { return k8sClient.Create(ctx, p) }).WithTimeout(10 * time.Second).Should(Succeed())
		})
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
		// Labels and the finalizer's removal go through; deletion too.
		// The policy controller writes the status meanwhile: an update
		// may meet a newer version, never a refusal.
		update := func(edit func(*policyv1alpha1.JobSetPolicy)) {
			GinkgoHelper()
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
					return err
				}
				edit(p)
				return k8sClient.Update(ctx, p)
			})).To(Succeed())
		}
		update(func(p *policyv1alpha1.JobSetPolicy) { p.Labels = map[string]string{"team": "ml"} })
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		update(func(p *policyv1alpha1.JobSetPolicy) { p.Finalizers = nil })
		// A change of the spec is judged.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).NotTo(Succeed())
	})
})
