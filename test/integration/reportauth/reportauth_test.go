package reportauth

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/controller/reports/token"
)

const (
	// audience is the one the agents' projected tokens are requested for.
	audience = "inplace.dev/agent-reports"
	// rbacDelay bounds how long the API server's authorizer takes to see
	// a binding created or deleted.
	rbacDelay = 10 * time.Second
)

// discoveryReader creates service account name in namespace and returns a
// config that authenticates as it. If grant, it is bound to a ClusterRole
// with only the rule of the RBAC marker of controller/reports/token, which
// make manifests writes into the manager's ClusterRole; otherwise it may
// do nothing the API server does not grant every authenticated user.
func discoveryReader(namespace, name string, grant bool) *rest.Config {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}})).To(Succeed())
	if grant {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name},
			Rules: []rbacv1.PolicyRule{{
				NonResourceURLs: []string{"/.well-known/openid-configuration", "/openid/v1/jwks"},
				Verbs:           []string{"get"},
			}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}
		for _, obj := range []client.Object{role, binding} {
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func(obj client.Object) {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed())
			}, obj)
		}
	}
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = requestToken(namespace, name, nil)
	return c
}

// requestToken returns a token of the TokenRequest API for service
// account name in namespace, bound to ref (nil: to nothing), for
// audiences (none: the API server's own).
func requestToken(namespace, name string, ref *authenticationv1.BoundObjectReference, audiences ...string) string {
	GinkgoHelper()
	tr, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, BoundObjectRef: ref},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// agentPod creates a Pod of service account agent. No node runs it: a
// token can be bound to a pending Pod.
func agentPod(namespace, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			ServiceAccountName: "agent",
			Containers:         []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	return pod
}

func podRef(pod *corev1.Pod) *authenticationv1.BoundObjectReference {
	return &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
}

var _ = Describe("The verifier of the agents' report tokens", Ordered, func() {
	var (
		ns       string
		pod      *corev1.Pod
		verifier *token.Verifier
	)

	BeforeAll(func() {
		ns = fw.NewNamespace(ctx, k8sClient).Name
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}})).To(Succeed())
		pod = agentPod(ns, "agent-0")

		manager := discoveryReader(ns, "manager", true)
		Eventually(func() (err error) {
			verifier, err = token.NewVerifier(ctx, manager, audience)
			return err
		}).WithTimeout(rbacDelay).Should(Succeed())
		GinkgoWriter.Printf("service-account issuer: %s\n", verifier.Issuer())
	})

	It("accepts a token bound to the agent's Pod, with the Pod's name and UID", func() {
		claims, err := verifier.Verify(ctx, requestToken(ns, "agent", podRef(pod), audience))
		Expect(err).NotTo(HaveOccurred())
		Expect(claims).To(Equal(token.Claims{Namespace: ns, ServiceAccount: "agent", PodName: pod.Name, PodUID: pod.UID}))
	})

	It("refuses a Pod-bound token for the API server's audience", func() {
		_, err := verifier.Verify(ctx, requestToken(ns, "agent", podRef(pod)))
		Expect(err).To(MatchError(ContainSubstring(`expected audience "` + audience + `"`)))
	})

	DescribeTable("refuses a token for the reports' audience not bound to a Pod",
		func(ref func() *authenticationv1.BoundObjectReference) {
			_, err := verifier.Verify(ctx, requestToken(ns, "agent", ref(), audience))
			Expect(err).To(MatchError(ContainSubstring("not bound to a Pod")))
		},
		Entry("bound to a Secret", func() *authenticationv1.BoundObjectReference {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-binding", Namespace: ns}}
			Expect(k8sClient.Create(ctx, secret)).To(Succeed())
			return &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: secret.Name, UID: secret.UID}
		}),
		Entry("bound to nothing", func() *authenticationv1.BoundObjectReference { return nil }),
	)

	// What a signature cannot tell: the API server would refuse this
	// token from now on, the local check does not. Callers match PodUID
	// with the Pod they know.
	It("still accepts the token of a deleted Pod, naming the deleted Pod's UID", func() {
		gone := agentPod(ns, "agent-gone")
		raw := requestToken(ns, "agent", podRef(gone), audience)
		Expect(k8sClient.Delete(ctx, gone)).To(Succeed())
		// Never scheduled, so deleted at once, with no kubelet to wait for.
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(gone), &corev1.Pod{}))).To(BeTrue())
		claims, err := verifier.Verify(ctx, raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(claims.PodUID).To(Equal(gone.UID))
	})

	It("cannot be built by a service account without the discovery reads", func() {
		nobody := discoveryReader(ns, "nobody", false)
		_, err := token.NewVerifier(ctx, nobody, audience)
		Expect(err).To(MatchError(ContainSubstring("403 Forbidden")))
	})
})
