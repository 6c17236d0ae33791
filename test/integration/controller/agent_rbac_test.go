package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("the agents' grants", func() {
	It("name the service accounts and broadcasts of the namespace's InPlaceRestart JobSets, and no more once one is deleted", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		inPlace := func(name, serviceAccount string) *jobset.JobSet {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: ns.Name}}
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, sa))).To(Succeed())
			rj := wrappers.MakeReplicatedJob("w").Obj()
			rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
			rj.Template.Spec.Template.Spec.ServiceAccountName = serviceAccount
			return create(wrappers.MakeJobSet(name, ns.Name).ReplicatedJob(rj).
				FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}).Obj())
		}
		grants := func(g Gomega) ([]string, []string) {
			var rb rbacv1.RoleBinding
			var role rbacv1.Role
			key := client.ObjectKey{Namespace: ns.Name, Name: controller.AgentRoleName}
			podsKey := client.ObjectKey{Namespace: ns.Name, Name: controller.AgentPodsBindingName}
			var pods rbacv1.RoleBinding
			if err := k8sClient.Get(ctx, key, &rb); apierrors.IsNotFound(err) {
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key, &role))).To(BeTrue(), "a Role without its RoleBinding")
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, podsKey, &pods))).To(BeTrue(), "the Pods' RoleBinding without the Role's")
				return nil, nil
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(k8sClient.Get(ctx, key, &role)).To(Succeed())
			// The Pods' rights, from the ClusterRole of config/agent, go to
			// the same service accounts.
			g.Expect(k8sClient.Get(ctx, podsKey, &pods)).To(Succeed())
			g.Expect(pods.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controller.AgentPodsClusterRole}))
			g.Expect(pods.Subjects).To(ConsistOf(rb.Subjects))
			var accounts, broadcasts []string
			for _, s := range rb.Subjects {
				accounts = append(accounts, s.Name)
			}
			for _, r := range role.Rules {
				broadcasts = append(broadcasts, r.ResourceNames...)
			}
			return accounts, broadcasts
		}
		expectGrants := func(accounts, broadcasts []string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				gotAccounts, gotBroadcasts := grants(g)
				g.Expect(gotAccounts).To(ConsistOf(accounts))
				g.Expect(gotBroadcasts).To(ConsistOf(broadcasts))
			}).WithTimeout(timeout).Should(Succeed())
		}

		a, b := inPlace("train-a", "trainer-a"), inPlace("train-b", "trainer-b")
		expectGrants([]string{"trainer-a", "trainer-b"}, []string{"train-a-epochs", "train-b-epochs"})

		Expect(k8sClient.Delete(ctx, a)).To(Succeed())
		expectGrants([]string{"trainer-b"}, []string{"train-b-epochs"})

		// The last one goes, and one comes back at once under its name:
		// the grants it needs come back too, whatever the cache showed
		// when its reconcile ran.
		Expect(k8sClient.Delete(ctx, b)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(b), &jobset.JobSet{}))
		}).WithTimeout(timeout).Should(BeTrue())
		b = inPlace("train-b", "trainer-b")
		expectGrants([]string{"trainer-b"}, []string{"train-b-epochs"})

		Expect(k8sClient.Delete(ctx, b)).To(Succeed())
		expectGrants(nil, nil)
	})
})
