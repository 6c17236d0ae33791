package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	policyreconciler "github.com/inplace-dev/inplace/policies/reconciler"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

const maxRestartsRego = `package guardrails.maxrestarts

deny contains msg if {
	input.object.spec.failurePolicy.maxRestarts > input.parameters.limit
	msg := sprintf("spec.failurePolicy.maxRestarts is %d, above this cluster's limit of %d: lower it", [input.object.spec.failurePolicy.maxRestarts, input.parameters.limit])
}
`

func params(v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return &apiextensionsv1.JSON{Raw: raw}
}

func withMaxRestarts(name, namespace string, n int32) *jobset.JobSet {
	return wrappers.MakeJobSet(name, namespace).
		ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
		FailurePolicy(&jobset.FailurePolicy{MaxRestarts: n}).Obj()
}

func expectReady(p *policyv1alpha1.JobSetPolicy, status metav1.ConditionStatus) *policyv1alpha1.JobSetPolicy {
	GinkgoHelper()
	return util.ExpectPolicyReady(ctx, k8sClient, p, status, 30*time.Second)
}

// startPolicyReplica runs the JobSetPolicy controller of another replica
// of the manager, with its own engine, until the spec ends.
func startPolicyReplica() *policies.Engine {
	GinkgoHelper()
	engine, err := policies.NewEngine(nil)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 framework.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	metrics, err := policyreconciler.NewMetrics(prometheus.NewRegistry())
	Expect(err).NotTo(HaveOccurred())
	Expect(policyreconciler.Setup(mgr, engine, metrics, nil)).To(Succeed())
	replicaCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(replicaCtx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
	})
	return engine
}

func asMap(obj any) map[string]any {
	GinkgoHelper()
	raw, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	Expect(json.Unmarshal(raw, &m)).To(Succeed())
	return m
}

var _ = Describe("JobSetPolicy", Ordered, func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	It("takes effect, changes and goes away without a restart; a broken version keeps the last good one", func() {
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-restarts"},
			Spec:       policyv1alpha1.JobSetPolicySpec{Rego: maxRestartsRego, Parameters: params(map[string]int{"limit": 10})},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		expectReady(policy, metav1.ConditionTrue)

		// In force: 11 is denied with the policy's message, 10 passes.
		err := k8sClient.Create(ctx, withMaxRestarts("eleven", ns.Name, 11), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("max-restarts: spec.failurePolicy.maxRestarts is 11, above this cluster's limit of 10")))
		// A valid JobSet the cluster forbids: Forbidden, not Invalid.
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an admin policy's refusal: want Forbidden (403), got %v", err)
		Expect(k8sClient.Create(ctx, withMaxRestarts("ten", ns.Name, 10), client.DryRunAll)).To(Succeed())

		// Changed: the new limit applies within seconds.
		// The policy controller writes the status concurrently: retry on conflict.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			policy.Spec.Parameters = params(map[string]int{"limit": 5})
			return k8sClient.Update(ctx, policy)
		})).To(Succeed())
		Eventually(func() error {
			return k8sClient.Create(ctx, withMaxRestarts("six", ns.Name, 6), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("above this cluster's limit of 5")))

		// Broken: the webhook refuses the version; one stored anyway (before
		// the webhook was installed, or by a newer engine's rules) shows the
		// error with its line in the status, and the last good version
		// stays in force.
		broken := "package guardrails.maxrestarts\n\ndeny contains msg if {\n\tmsg := \n}\n"
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			policy.Spec.Rego = broken
			return k8sClient.Update(ctx, policy)
		})).To(MatchError(ContainSubstring("the policy would not be in force: spec.rego: 1 error occurred: max-restarts.rego:5: rego_parse_error")))
		withoutPolicyWebhook(func() {
			Eventually(func() error {
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
				policy.Spec.Rego = broken
				return k8sClient.Update(ctx, policy)
			}).WithTimeout(10 * time.Second).Should(Succeed())
		})
		got := expectReady(policy, metav1.ConditionFalse)
		Expect(got.Status.Errors).NotTo(BeEmpty())
		Expect(strings.Join(got.Status.Errors, "\n")).To(ContainSubstring("max-restarts.rego:5"))
		Expect(k8sClient.Create(ctx, withMaxRestarts("six", ns.Name, 6), client.DryRunAll)).
			To(MatchError(ContainSubstring("above this cluster's limit of 5")), "the broken version replaced the working one")
		Expect(got.Status.InForceGeneration).To(Equal(got.Generation-1), "the status keeps the last version that compiled")

		// A replica that starts now never saw the good version compile: it
		// enforces the one the status keeps, as the first replica does.
		replica := startPolicyReplica()
		Eventually(func(g Gomega) {
			d, err := replica.Evaluate(ctx, policies.Input{Operation: "CREATE", Object: asMap(withMaxRestarts("six", ns.Name, 6))})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Denied).To(ContainElement(HaveField("Message", ContainSubstring("above this cluster's limit of 5"))))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		// So does the webhook's manager, started again.
		fw.StopManager()
		fw.StartManager(cfg)
		Eventually(func() error {
			return k8sClient.Create(ctx, withMaxRestarts("six", ns.Name, 6), client.DryRunAll)
		}).WithTimeout(10*time.Second).Should(MatchError(ContainSubstring("above this cluster's limit of 5")), "a restarted manager enforces nothing of the policy")

		// Removed: nothing is denied any more.
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Create(ctx, withMaxRestarts("hundred", ns.Name, 100), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	It("with Warn admits the JobSet and warns the client", func() {
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-restarts-warn"},
			Spec: policyv1alpha1.JobSetPolicySpec{Rego: maxRestartsRego, EnforcementAction: policyv1alpha1.Warn,
				Parameters: params(map[string]int{"limit": 1})},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, policy)).To(Succeed()) })
		expectReady(policy, metav1.ConditionTrue)

		warnings := &recordingWarnings{}
		Eventually(func(g Gomega) {
			g.Expect(clientWithWarnings(warnings).Create(ctx, withMaxRestarts("warned", ns.Name, 3), client.DryRunAll)).To(Succeed())
			g.Expect(strings.Join(warnings.messages(), "\n")).To(ContainSubstring("max-restarts-warn: spec.failurePolicy.maxRestarts is 3"))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	It("with DryRun admits silently, records an Event, and the audit lists existing violations", func() {
		js := withMaxRestarts("existing", ns.Name, 7)
		Expect(k8sClient.Create(ctx, js)).To(Succeed())

		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "max-restarts-dry"},
			Spec: policyv1alpha1.JobSetPolicySpec{Rego: maxRestartsRego, EnforcementAction: policyv1alpha1.DryRun,
				Parameters: params(map[string]int{"limit": 2}),
				Match: &policyv1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns.Name}}}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, policy)).To(Succeed()) })
		expectReady(policy, metav1.ConditionTrue)

		Eventually(func(g Gomega) {
			var got policyv1alpha1.JobSetPolicy
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), &got)).To(Succeed())
			g.Expect(got.Status.Audit).NotTo(BeNil())
			g.Expect(got.Status.Audit.Violations).To(ContainElement(policyv1alpha1.AuditViolation{
				Namespace: ns.Name, Name: "existing",
				Message: "spec.failurePolicy.maxRestarts is 7, above this cluster's limit of 2: lower it",
			}))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		warnings := &recordingWarnings{}
		Expect(clientWithWarnings(warnings).Create(ctx, withMaxRestarts("dry", ns.Name, 3))).To(Succeed())
		Expect(warnings.messages()).To(BeEmpty())
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", "PolicyViolationDryRun"),
				HaveField("InvolvedObject.Name", "dry"),
				HaveField("Message", ContainSubstring("max-restarts-dry: spec.failurePolicy.maxRestarts is 3")))))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})
})
