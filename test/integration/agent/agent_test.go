package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
)

// Package agent tests what the in-place restart agents may do on a real
// cluster: the Role the controller grants their service account, and the
// ValidatingAdmissionPolicy of config/agent.

const timeout = 30 * time.Second

var (
	fw        = &framework.Framework{Name: "integration-agent", FullCluster: true, Webhooks: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

func TestAgentSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Agent permissions")
}

var _ = BeforeSuite(func() {
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	fw.StartManager(cfg)
})

var _ = AfterSuite(func() {
	fw.Teardown()
})

func create(js *jobset.JobSet) *jobset.JobSet {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	return js
}

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
	It("is accepted by the apiserver", func() {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "agent", "validating-admission-policy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(data), "\n---\n") {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			Expect(k8sClient.Create(ctx, u, client.DryRunAll)).To(Succeed(), u.GetKind())
		}
	})
})
