package webhook

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
)

const exemptionGuard = "config/webhook/exemption-guard.yaml"

var _ = Describe("The webhooks' exemption label", func() {
	It("may be set only by who holds the exempt verb; anyone may take it off", func() {
		Expect(deploy.Apply(ctx, k8sClient, exemptionGuard)).To(Succeed())
		DeferCleanup(func() {
			objs, err := deploy.Objects(exemptionGuard)
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
			}
		})

		// A namespace admin: may create and label namespaces, no more.
		admin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "namespace-admin-"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "update", "patch"}}}}
		Expect(k8sClient.Create(ctx, admin)).To(Succeed())
		bind := func(role, user string) {
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "exemption-test-"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
			Expect(k8sClient.Create(ctx, b)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, b))).To(Succeed()) })
		}
		bind(admin.Name, "alice")
		bind(admin.Name, "platform")
		bind("inplace-webhook-exemption", "platform")
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, admin)).To(Succeed()) })
		as := func(user string) client.Client {
			c := rest.CopyConfig(cfg)
			c.Impersonate = rest.ImpersonationConfig{UserName: user}
			cl, err := client.New(c, client.Options{Scheme: framework.Scheme})
			Expect(err).NotTo(HaveOccurred())
			return cl
		}
		disabled := map[string]string{"inplace.dev/webhooks": "disabled"}
		named := func(prefix string, labels map[string]string) *corev1.Namespace {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: labels}}
		}

		// The policy reaches the apiserver's admission some time after it
		// is written: until alice is refused, the check is not in force.
		Eventually(func() error {
			return as("alice").Create(ctx, named("alice-", disabled), client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(SatisfyAll(
			ContainSubstring("metadata.labels[inplace.dev/webhooks]: disabled switches the admission webhooks and every JobSetPolicy off"),
			ContainSubstring("alice may not set it: it takes the verb exempt on jobsetpolicies.policy.inplace.dev"))))

		// Not later either, by an update.
		ns := named("alice-", nil)
		Expect(as("alice").Create(ctx, ns)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })
		ns.Labels = disabled
		Expect(as("alice").Update(ctx, ns)).To(MatchError(ContainSubstring("alice may not set it")))

		// The platform team may; and alice may turn the guardrails back on.
		Expect(as("platform").Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
		ns.Labels = disabled
		Expect(as("platform").Update(ctx, ns)).To(Succeed())
		Expect(as("alice").Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
		ns.Labels = map[string]string{"team": "a"}
		Expect(as("alice").Update(ctx, ns)).To(Succeed())
	})
})
