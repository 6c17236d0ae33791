package agent

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/test/util"
)

// policyPrefix begins every refusal of the agents' admission policy.
const policyPrefix = "is bound to the in-place restart agents' Role in namespace "

var _ = Describe("the agents' admission policy", func() {
	It("lets a service account of the agents change only its own Pod's epoch, upwards, whatever its token and grants", func() {
		js, pods := inPlaceJobSet("vap", 2)
		ns := js.Namespace
		admin := kubernetes.NewForConfigOrDie(cfg)

		// What a user may have granted the namespace's default service
		// account besides the agents' Role: create, delete and change Pods,
		// their subresources included. The policy, not RBAC, must refuse
		// these to the agents' service account.
		userGrants(ns, "default")
		// Another service account of the namespace, not bound to the
		// agents' Role, with the same grants: the policy leaves it alone.
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: ns}})).To(Succeed())
		userGrants(ns, "builder")

		agentClient := clientFor(podToken(pods[0]))
		patch := func(c kubernetes.Interface, pod, body string, dryRun bool, subresources ...string) error {
			opts := metav1.PatchOptions{}
			if dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			_, err := c.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(body), opts, subresources...)
			return err
		}
		refused := func(what string) gomegatypes.GomegaMatcher {
			return MatchError(SatisfyAll(ContainSubstring(policyPrefix+ns+" (RoleBinding "+controller.AgentRoleName+")"), ContainSubstring(what)))
		}

		// The policy, its binding and its parameter (the controller's
		// RoleBinding) reach the API server's admission through informers,
		// some time after they are written: until this namespace's canary,
		// a forbidden change sent as a dry run, is refused by the policy,
		// a request may pass unchecked. Nothing is stored by a dry run.
		canaries, waited := 0, time.Now()
		Eventually(func() error {
			canaries++
			return patch(agentClient, pods[0].Name, `{"metadata":{"labels":{"canary":"x"}}}`, true)
		}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(refused("its labels may not change"),
			"the API server does not enforce the agents' policy in the namespace")
		AddReportEntry("canary", fmt.Sprintf("the policy refused the canary after %v (%d dry runs)", time.Since(waited).Round(time.Millisecond), canaries))

		By("its own Pod's epoch, through the agent's own transport: allowed, as often as it likes, upwards")
		t := &agent.KubeTransport{Client: agentClient, Namespace: ns, Pod: pods[0].Name, JobSet: js.Name}
		Expect(t.ReportEpoch(ctx, 1)).To(Succeed())
		Expect(t.ReportEpoch(ctx, 1)).To(Succeed())
		Expect(t.ReportEpoch(ctx, 2)).To(Succeed())
		var got corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &got)).To(Succeed())
		Expect(got.Annotations).To(HaveKeyWithValue(jobset.EpochKey, "2"))

		By("its own Pod's epoch, lowered, removed or not a positive decimal integer: refused")
		for body, why := range map[string]string{
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`:           "the epoch may not decrease, from 2 to 1",
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":null}}}`:          "the epoch may not be removed",
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"three"}}}`:       `not "three"`,
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"-3"}}}`:          `not "-3"`,
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"03"}}}`:          `not "03"`,
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"2147483648"}}}`:  `not "2147483648"`,
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"99999999999"}}}`: `not "99999999999"`,
		} {
			Expect(patch(agentClient, pods[0].Name, body, false)).To(refused(why), body)
		}

		By("a report below its Pod's epoch, as an agent given a stale POD_EPOCH sends it: Forbidden, on which the agent reads its Pod")
		err := t.ReportEpoch(ctx, 1)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a lowered epoch: %v", err)

		By("its own Pod's attempt, as an agent made for upstream JobSet reports it: allowed from 0, upwards")
		for _, attempt := range []string{"0", "0", "1"} {
			Expect(patch(agentClient, pods[0].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":"`+attempt+`"}}}`, false)).To(Succeed())
		}
		for body, why := range map[string]string{
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":"0"}}}`:  "the attempt may not decrease, from 1 to 0",
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":null}}}`: "the attempt may not be removed",
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/in-place-restart-attempt":"-1"}}}`: `not "-1"`,
		} {
			Expect(patch(agentClient, pods[0].Name, body, false)).To(refused(why), body)
		}

		By("in process scope, its own Pod's worker exit and worker restarts through the agent's transport: allowed, in their formats")
		Expect(t.ReportProcessEpoch(ctx, 3, 1)).To(Succeed())
		Expect(t.ReportWorkerExit(ctx, protocol.WorkerExit{Epoch: 3, Container: "worker", Code: 1})).To(Succeed())
		Expect(t.ReportReady(ctx, 3)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &got)).To(Succeed())
		Expect(got.Annotations).To(And(HaveKeyWithValue(jobset.EpochKey, "3"), HaveKeyWithValue(protocol.WorkerRestartsAnnotation, "1"),
			HaveKeyWithValue(protocol.WorkerExitAnnotation, "3:worker:1"), HaveKeyWithValue(protocol.ReadyEpochAnnotation, "3")))
		for body, why := range map[string]string{
			`{"metadata":{"annotations":{"inplace.dev/worker-exit":"3:Worker:1"}}}`:          `inplace.dev/worker-exit must be <epoch>:<container>:<exit code 1 to 255>, not "3:Worker:1"`,
			`{"metadata":{"annotations":{"inplace.dev/worker-exit":"3:worker:256"}}}`:        `not "3:worker:256"`,
			`{"metadata":{"annotations":{"inplace.dev/worker-exit":"9999999999:worker:1"}}}`: `not "9999999999:worker:1"`,
			`{"metadata":{"annotations":{"inplace.dev/worker-restarts":"9999999999"}}}`:      `inplace.dev/worker-restarts must be a count, not "9999999999"`,
			`{"metadata":{"annotations":{"inplace.dev/worker-exit":"0:worker:1"}}}`:          `not "0:worker:1"`,
			`{"metadata":{"annotations":{"inplace.dev/worker-restarts":"-1"}}}`:              `inplace.dev/worker-restarts must be a count, not "-1"`,
			`{"metadata":{"annotations":{"inplace.dev/ready-epoch":"x"}}}`:                   `inplace.dev/ready-epoch must be an epoch, not "x"`,
		} {
			Expect(patch(agentClient, pods[0].Name, body, false)).To(refused(why), body)
		}

		By("anything else on its own Pod: refused")
		for body, why := range map[string]string{
			`{"metadata":{"annotations":{"other":"x"}}}`:                                "its other annotations may not change",
			`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"3","other":"x"}}}`: "its other annotations may not change",
			`{"metadata":{"labels":{"other":"x"}}}`:                                     "its labels may not change",
			`{"metadata":{"finalizers":["example.com/keep"]}}`:                          "its finalizers and owner references may not change",
			`{"spec":{"activeDeadlineSeconds":5}}`:                                      "its spec may not change",
		} {
			Expect(patch(agentClient, pods[0].Name, body, false)).To(refused(why), body)
		}
		_, err = agentClient.CoreV1().Pods(ns).Patch(ctx, pods[0].Name, types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"evil:1"}]`), metav1.PatchOptions{})
		Expect(err).To(refused("its spec may not change"), "the image")
		err = patch(agentClient, pods[0].Name, `{"status":{"conditions":[{"type":"Evil","status":"True"}]}}`, false, "status")
		Expect(err).To(refused("UPDATE of pods/status is refused"))
		err = patch(agentClient, pods[0].Name, `{"spec":{"ephemeralContainers":[{"name":"debug","image":"evil:1"}]}}`, true, "ephemeralcontainers")
		Expect(err).To(refused("UPDATE of pods/ephemeralcontainers is refused"))
		err = agentClient.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pods[1].Name).SubResource("exec").
			Param("command", "true").Param("stdout", "true").Do(ctx).Error()
		Expect(err).To(refused("CONNECT of pods/exec is refused"))
		err = agentClient.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pods[1].Name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		Expect(err).To(refused("CREATE of pods/eviction is refused"))
		err = agentClient.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).To(refused("DELETE of pods is refused"))
		_, err = agentClient.CoreV1().Pods(ns).Create(ctx, plainPod(ns, "spawned", node.Name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).To(refused("CREATE of pods is refused"))

		By("another Pod, with its own Pod's token: refused")
		Expect(patch(agentClient, pods[1].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`, true)).
			To(refused(fmt.Sprintf("this token is bound to Pod %s on node %s, not to %s", pods[0].Name, node.Name, pods[1].Name)))

		By("a token bound to no Pod: a legacy Secret-based token, and one requested for no Pod, change nothing")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Namespace: ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey(corev1.ServiceAccountTokenKey))
		}).WithTimeout(timeout).Should(Succeed(), "the token controller fills the legacy token")
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for name, token := range map[string]string{"legacy": string(secret.Data[corev1.ServiceAccountTokenKey]), "unbound": tr.Status.Token} {
			c := clientFor(token)
			Expect(patch(c, pods[0].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"3"}}}`, true)).
				To(refused("this token names no Pod and node"), name)
			Expect(patch(c, pods[1].Name, `{"metadata":{"labels":{"other":"x"}}}`, true)).
				To(refused("this token names no Pod and node"), name)
		}

		By("a Pod in another namespace: refused (no grant there)")
		other := fw.NewNamespace(ctx, k8sClient)
		elsewhere := plainPod(other.Name, "elsewhere", "")
		Expect(k8sClient.Create(ctx, elsewhere)).To(Succeed())
		_, err = agentClient.CoreV1().Pods(other.Name).Patch(ctx, elsewhere.Name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can patch a Pod of another namespace: %v", err)

		By("a namespace without the agents' RoleBinding: unaffected")
		util.WaitForDefaultServiceAccount(ctx, k8sClient, other.Name)
		userGrants(other.Name, "default")
		tr, err = admin.CoreV1().ServiceAccounts(other.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clientFor(tr.Status.Token).CoreV1().Pods(other.Name).Patch(ctx, elsewhere.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"built":"yes"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("reads: a watch of its JobSet's broadcast only")
		Expect(watchBroadcast(agentClient, ns, js.Name)).To(Succeed(), "the agent cannot watch its broadcast")
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings", Namespace: ns}})).To(Succeed())
		_, err = agentClient.CoreV1().ConfigMaps(ns).Get(ctx, "team-settings", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read another ConfigMap: %v", err)
		_, err = agentClient.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can list ConfigMaps: %v", err)

		By("a service account the agents' RoleBinding does not name: unaffected")
		builderToken, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		builder := clientFor(builderToken.Status.Token)
		Expect(patch(builder, pods[1].Name, `{"metadata":{"labels":{"built":"yes"},"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`, false)).To(Succeed())
		Expect(patch(builder, pods[1].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"0"}}}`, true)).To(Succeed())
		_, err = builder.CoreV1().Pods(ns).Create(ctx, plainPod(ns, "built", node.Name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).NotTo(HaveOccurred())
		Expect(builder.CoreV1().Pods(ns).Delete(ctx, pods[1].Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})).To(Succeed())

		By("nothing refused was stored")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &got)).To(Succeed())
		Expect(got.Annotations).To(HaveKeyWithValue(jobset.EpochKey, "3"))
		Expect(got.Annotations).NotTo(HaveKey("other"))
		Expect(got.Labels).NotTo(HaveKey("other"))
		Expect(got.Finalizers).NotTo(ContainElement("example.com/keep"))
		Expect(got.Spec.ActiveDeadlineSeconds).To(BeNil())
		Expect(strings.Join(images(got), ",")).NotTo(ContainSubstring("evil"))
	})
})

// clientFor authenticates with a bearer token only.
func clientFor(token string) kubernetes.Interface {
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	return kubernetes.NewForConfigOrDie(c)
}

// userGrants gives a service account, besides anything inplace grants it,
// the rights on Pods a user might: create, update, patch and delete Pods,
// their status and ephemeral containers, exec into them and evict them.
func userGrants(ns, serviceAccount string) {
	GinkgoHelper()
	name := "user-grants-" + serviceAccount
	Expect(k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "pods/ephemeralcontainers", "pods/exec", "pods/eviction"},
			Verbs: []string{"get", "create", "update", "patch", "delete"}}},
	})).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: ns}},
	})).To(Succeed())
}

func plainPod(ns, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "registry.example/worker:1"}}},
	}
}

func images(pod corev1.Pod) []string {
	var out []string
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		out = append(out, c.Image)
	}
	return out
}
