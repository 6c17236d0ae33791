package controller

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/broadcast"
	"github.com/inplace-dev/inplace/test/util"
)

// These specs play the agents by writing the Pods' epoch annotations and
// the kubelet by writing container states, and check the controller's side
// of the epoch protocol through the real API server.
var _ = Describe("the epoch protocol of InPlaceRestart", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	allPods := func(js *jobset.JobSet, want int) []corev1.Pod {
		GinkgoHelper()
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(want))
			pods = list.Items
		}).WithTimeout(timeout).Should(Succeed())
		return pods
	}
	expectEpochs := func(js *jobset.JobSet, deprecated, synced int32) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			got := get(js)
			g.Expect(got.Status.DeprecatedEpoch).To(Equal(deprecated), "deprecatedEpoch")
			g.Expect(got.Status.SyncedEpoch).To(Equal(synced), "syncedEpoch")
			var cm corev1.ConfigMap
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: broadcast.Name(js.Name)}, &cm)).To(Succeed())
			b, err := broadcast.Decode(cm.Data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.DeprecatedEpoch).To(Equal(deprecated), "broadcast deprecatedEpoch")
			g.Expect(b.SyncedEpoch).To(Equal(synced), "broadcast syncedEpoch")
		}).WithTimeout(timeout).Should(Succeed())
	}

	It("syncs, deprecates the moment a worker exits, counts exactly maxRestarts and never recreates a Job", func() {
		rj := util.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(util.MakeJobSet("ip", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		expectJobs(js, "0", "ip-w-0", "ip-w-1")
		jobUIDs := uids(js)

		pods := allPods(js, 4)
		for i := range pods {
			util.SetEpoch(ctx, k8sClient, &pods[i], "1")
		}
		expectEpochs(js, 0, 1)

		util.ExitContainer(ctx, k8sClient, &pods[2], "worker", 1)
		expectEpochs(js, 1, 1)
		got := expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestart")
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(1)))
		Expect(findCondition(got, jobset.JobSetRestarting).Message).To(ContainSubstring("container worker of Pod " + pods[2].Name + " exited"))
		expectEvent(js, "InPlaceRestart")

		// Every agent restarted and reported the next epoch.
		for i := range pods {
			util.SetPodsRunning(ctx, k8sClient, ns.Name, pods[i].Labels["batch.kubernetes.io/job-name"], 2)
			util.SetEpoch(ctx, k8sClient, &pods[i], "2")
		}
		expectEpochs(js, 1, 2)
		expectCondition(js, jobset.JobSetRestarting, "False", "InPlaceRestartCompleted")
		Expect(uids(js)).To(Equal(jobUIDs), "an in-place restart recreated a Job")

		// The one allowed restart is used: the next exit fails the JobSet.
		util.ExitContainer(ctx, k8sClient, &pods[0], "worker", 1)
		got = expectCondition(js, jobset.JobSetFailed, "True", "ReachedMaxRestarts")
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
	})
})

var _ = Describe("the agents' permissions", func() {
	It("are granted to the Pods' service account, and no more", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		rj := util.MakeReplicatedJob("w").Obj()
		rj.Template.Spec.BackoffLimit = nil
		js := create(util.MakeJobSet("rbac", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}).Obj())

		var pod corev1.Pod
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			pod = list.Items[0]
		}).WithTimeout(timeout).Should(Succeed())

		cs := kubernetes.NewForConfigOrDie(cfg)
		var agentClient *kubernetes.Clientset
		Eventually(func(g Gomega) {
			tr, err := cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			agentCfg := rest.AnonymousClientConfig(cfg)
			agentCfg.BearerToken = tr.Status.Token
			agentClient = kubernetes.NewForConfigOrDie(agentCfg)
			// The binding exists once the controller reconciled the JobSet.
			_, err = agentClient.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(timeout).Should(Succeed())

		t := &agent.KubeTransport{Client: agentClient, Namespace: ns.Name, Pod: pod.Name, JobSet: js.Name}
		Expect(t.ReportEpoch(ctx, 1)).To(Succeed(), "the agent cannot write its epoch")
		_, _, err := t.Self(ctx)
		Expect(err).NotTo(HaveOccurred(), "the agent cannot read its Pod")

		_, err = agentClient.RESTClient().Get().AbsPath("/apis/jobset.x-k8s.io/v1alpha2/namespaces", ns.Name, "jobsets").DoRaw(ctx)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read JobSets: %v", err)
		_, err = agentClient.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read Secrets: %v", err)
		err = agentClient.CoreV1().Pods(ns.Name).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can delete Pods: %v", err)
	})
})

var _ = Describe("the agents' admission policy", func() {
	It("lets an agent change the epoch annotation of its own Pod, and nothing else", func() {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "agent", "validating-admission-policy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(data), "\n---\n") {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, u))).To(Succeed())
		}

		ns := fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		rj := util.MakeReplicatedJob("w").Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil
		js := create(util.MakeJobSet("vap", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}).Obj())
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2))
			pods = list.Items
		}).WithTimeout(timeout).Should(Succeed())

		// A token bound to pods[0], as the kubelet mounts it into that Pod.
		cs := kubernetes.NewForConfigOrDie(cfg)
		tr, err := cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: pods[0].Name, UID: pods[0].UID,
			}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		agentCfg := rest.AnonymousClientConfig(cfg)
		agentCfg.BearerToken = tr.Status.Token
		agentClient := kubernetes.NewForConfigOrDie(agentCfg)

		patch := func(pod string, body string) error {
			_, err := agentClient.CoreV1().Pods(ns.Name).Patch(ctx, pod, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
		Eventually(func() error {
			return patch(pods[0].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`)
		}).WithTimeout(timeout).Should(Succeed(), "an agent cannot write its own epoch")
		Eventually(func() error {
			return patch(pods[0].Name, `{"metadata":{"annotations":{"other":"x"}}}`)
		}).WithTimeout(timeout).Should(MatchError(ContainSubstring("may change only the jobset.sigs.k8s.io/epoch annotation")))
		Expect(patch(pods[0].Name, `{"metadata":{"labels":{"other":"x"}}}`)).To(MatchError(ContainSubstring("may not change a Pod's labels or spec")))
		Expect(patch(pods[1].Name, `{"metadata":{"annotations":{"jobset.sigs.k8s.io/epoch":"1"}}}`)).To(MatchError(ContainSubstring("may change only its own Pod")))
	})
})
