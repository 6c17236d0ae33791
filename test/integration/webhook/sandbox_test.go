package webhook

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
)

// A policy that would read one of the manager's files into its denial
// message through a JSON schema's $ref.
const schemaRefRego = `package guardrails.leak

deny contains msg if {
	[ok, errs] := json.match_schema(input.object, {"$ref": "file:///etc/hostname"})
	not ok
	msg := sprintf("%v", [errs])
}
`

// A policy that never finishes.
const endlessRego = `package guardrails.endless

deny contains "never" if {
	some i in numbers.range(1, 1000000000)
	i < 0
}
`

// A policy that overflows the Go stack: unifying two values of 2^22 paths
// recurses once per path, in OPA's evaluator, where no recover reaches.
var stackOverflowRego = func() string {
	var b strings.Builder
	b.WriteString("package guardrails.overflow\n\ndeny contains \"never\" if {\n")
	for _, v := range []string{"a", "b"} {
		fmt.Fprintf(&b, "\t%s0 := [1]\n", v)
		for i := 1; i <= 22; i++ {
			fmt.Fprintf(&b, "\t%s%d := array.concat([%s%d], [%s%d])\n", v, i, v, i-1, v, i-1)
		}
	}
	b.WriteString("\ta22 = b22\n\tfalse\n}\n")
	return b.String()
}()

var _ = Describe("The policy sandbox", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	createPolicy := func(name, rego string) *policyv1alpha1.JobSetPolicy {
		GinkgoHelper()
		p := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1alpha1.JobSetPolicySpec{Rego: rego, Match: &policyv1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns.Name}}}},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
		return p
	}

	// expectFailing waits for p to be marked Ready=False,
	// EvaluationFailing, for the failure kind reason.
	expectFailing := func(p *policyv1alpha1.JobSetPolicy, reason string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var got policyv1alpha1.JobSetPolicy
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(policyv1alpha1.ReasonEvaluationFailing))
			g.Expect(c.Message).To(ContainSubstring("(" + reason + ")"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}

	It("refuses a builtin that reads files, naming it, and keeps the policy out of force", func() {
		refused := &policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "schema-ref"}, Spec: policyv1alpha1.JobSetPolicySpec{Rego: schemaRefRego}}
		Expect(k8sClient.Create(ctx, refused)).To(MatchError(ContainSubstring(
			"the policy would not be in force: spec.rego: schema-ref.rego:4: json.match_schema is not allowed in a policy")))
		// Stored past the webhook, it is refused by the controller.
		var p *policyv1alpha1.JobSetPolicy
		withoutPolicyWebhook(func() { p = expectReady(createPolicy("schema-ref", schemaRefRego), metav1.ConditionFalse) })
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
		Expect(c.Reason).To(Equal(policyv1alpha1.ReasonCompileError))
		Expect(p.Status.Errors).To(ContainElement(ContainSubstring("schema-ref.rego:4: json.match_schema is not allowed in a policy: it resolves a schema's $ref to any URL or file")))
		Expect(k8sClient.Create(ctx, withMaxRestarts("admitted", ns.Name, 1), client.DryRunAll)).To(Succeed())
	})

	It("bounds a policy that never finishes: it denies in time and is marked failing", func() {
		p := expectReady(createPolicy("endless", endlessRego), metav1.ConditionTrue)
		for range 3 {
			start := time.Now()
			err := k8sClient.Create(ctx, withMaxRestarts("slow", ns.Name, 1), client.DryRunAll)
			Expect(err).To(MatchError(ContainSubstring("endless: evaluation failed")))
			Expect(err).To(MatchError(ContainSubstring("exceeded its time limit")))
			// At its time limit, well within the webhook's 10 s: the
			// apiserver's own timeout would say nothing of the policy.
			Expect(time.Since(start)).To(BeNumerically("<", evaluationTimeout+3*time.Second))
		}
		expectFailing(p, "timeout")

		// Fixed, it is Ready again and decides.
		Eventually(func() error {
			var got policyv1alpha1.JobSetPolicy
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				return err
			}
			got.Spec.Rego = maxRestartsRego
			got.Spec.Parameters = params(map[string]int{"limit": 0})
			return k8sClient.Update(ctx, &got)
		}).WithTimeout(10 * time.Second).Should(Succeed())
		expectReady(p, metav1.ConditionTrue)
		Eventually(func() error {
			return k8sClient.Create(ctx, withMaxRestarts("fixed", ns.Name, 1), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("above this cluster's limit of 0")))
	})

	It("outlives a policy that overflows the Go stack: it denies, is marked failing, and admission runs on", func() {
		p := expectReady(createPolicy("overflow", stackOverflowRego), metav1.ConditionTrue)
		for range 3 {
			err := k8sClient.Create(ctx, withMaxRestarts("deep", ns.Name, 1), client.DryRunAll)
			Expect(err).To(MatchError(ContainSubstring("overflow: evaluation failed: the policy evaluator process ended")))
			Expect(err).To(MatchError(ContainSubstring("fatal error: stack overflow")))
		}
		expectFailing(p, "crash")
		// The JobSets it does not match are admitted by the same replica.
		other := fw.NewNamespace(ctx, k8sClient)
		Expect(k8sClient.Create(ctx, withMaxRestarts("elsewhere", other.Name, 1), client.DryRunAll)).To(Succeed())
	})
})
