package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
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
	// node is where the JobSets' Pods are bound, so that a token bound to
	// one names its node as the kubelet's does. No kubelet runs it.
	node *corev1.Node
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
	// Every spec runs under the agents' admission policy, as config/
	// ships it.
	Expect(deploy.ApplyKustomization(ctx, k8sClient, deploy.AgentPolicy)).To(Succeed())
	node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agents-node"}}
	Expect(k8sClient.Create(ctx, node)).To(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
})

// inPlaceJobSet creates, in a new namespace, an InPlaceRestart JobSet of
// one Job with parallelism Pods, and returns it with its Pods once they
// exist, bound to node (which no kubelet runs).
func inPlaceJobSet(name string, parallelism int32, mods ...func(*jobset.JobSet)) (*jobset.JobSet, []corev1.Pod) {
	GinkgoHelper()
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	rj := wrappers.MakeReplicatedJob("w").Parallelism(parallelism).Obj()
	rj.Template.Spec.BackoffLimit = nil
	rj.Template.Spec.Template.Spec.NodeName = node.Name
	js := wrappers.MakeJobSet(name, ns.Name).ReplicatedJob(rj).
		FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart}).Obj()
	for _, mod := range mods {
		mod(js)
	}
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(int(parallelism)))
		pods = list.Items
	}).WithTimeout(timeout).Should(Succeed())
	return js, pods
}

// podToken is a token of the Pod's service account bound to the Pod, as
// the kubelet projects it into the Pod: it names the Pod and its node.
func podToken(pod corev1.Pod) string {
	GinkgoHelper()
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
		}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// watchBroadcast opens and closes the watch of its JobSet's broadcast
// that an agent opens: by name.
func watchBroadcast(c kubernetes.Interface, namespace, jobSet string) error {
	w, err := c.CoreV1().ConfigMaps(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", protocol.BroadcastName(jobSet)).String(),
	})
	if err == nil {
		w.Stop()
	}
	return err
}

var _ = Describe("the agents' permissions", func() {
	It("are granted to the Pods' service account, and no more", func() {
		js, pods := inPlaceJobSet("rbac", 1)
		pod, ns := pods[0], &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: js.Namespace}}

		// The agent's credentials: a token bound to its Pod, as the
		// kubelet projects it (the admission policy refuses any other).
		agentCfg := rest.AnonymousClientConfig(cfg)
		agentCfg.BearerToken = podToken(pod)
		agentClient := kubernetes.NewForConfigOrDie(agentCfg)
		// Its JobSet's broadcast, watched by name as the agent does (once
		// the controller granted it), not read otherwise, and no other
		// ConfigMap.
		Eventually(func() error {
			return watchBroadcast(agentClient, ns.Name, js.Name)
		}).WithTimeout(timeout).Should(Succeed(), "the agent cannot watch its broadcast")
		_, err := agentClient.CoreV1().ConfigMaps(ns.Name).Get(ctx, protocol.BroadcastName(js.Name), metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can get its broadcast, which it only watches: %v", err)
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings", Namespace: ns.Name}}
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		_, err = agentClient.CoreV1().ConfigMaps(ns.Name).Get(ctx, other.Name, metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read another ConfigMap: %v", err)
		_, err = agentClient.CoreV1().ConfigMaps(ns.Name).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can list every ConfigMap: %v", err)

		t := &agent.KubeTransport{Client: agentClient, Namespace: ns.Name, Pod: pod.Name, JobSet: js.Name}
		Expect(t.ReportEpoch(ctx, 1)).To(Succeed(), "the agent cannot write its epoch")
		_, _, err = t.Self(ctx)
		Expect(err).NotTo(HaveOccurred(), "the agent cannot read its Pod")

		_, err = agentClient.RESTClient().Get().AbsPath("/apis/jobset.x-k8s.io/v1alpha2/namespaces", ns.Name, "jobsets").DoRaw(ctx)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read JobSets: %v", err)
		_, err = agentClient.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can read Secrets: %v", err)
		err = agentClient.CoreV1().Pods(ns.Name).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent can delete Pods: %v", err)
	})
})

var _ = Describe("the agent binary", func() {
	It("reports its epoch soon after it starts and stays small", func() {
		dir := GinkgoT().TempDir()
		bin := filepath.Join(dir, "inplace-agent")
		build := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "github.com/inplace-dev/inplace/cmd/agent")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		js, pods := inPlaceJobSet("binary", 1)
		pod, ns := pods[0], &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: js.Namespace}}

		// The agent's credentials: a token bound to its Pod, in a kubeconfig.
		token := podToken(pod)
		agentCfg := rest.AnonymousClientConfig(cfg)
		agentCfg.BearerToken = token
		kubeconfig := framework.WriteKubeconfig(agentCfg)
		// The controller grants the agents their Role when it reconciles:
		// the broadcast may be watched then.
		Eventually(func() error {
			return watchBroadcast(kubernetes.NewForConfigOrDie(agentCfg), ns.Name, js.Name)
		}).WithTimeout(timeout).Should(Succeed())

		ports, err := cluster.FreePorts(1)
		Expect(err).NotTo(HaveOccurred())
		port := ports[0]
		cmd := exec.Command(bin)
		cmd.Env = []string{
			"KUBECONFIG=" + kubeconfig,
			protocol.EnvNamespace + "=" + ns.Name,
			protocol.EnvPodName + "=" + pod.Name,
			protocol.EnvJobSetName + "=" + js.Name,
			protocol.EnvReplicatedJobName + "=w",
			protocol.EnvRestartExitCode + "=88",
			protocol.EnvBarrierPort + "=" + strconv.Itoa(port),
		}
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		started := time.Now()
		Expect(cmd.Start()).To(Succeed())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		DeferCleanup(func() { _ = cmd.Process.Kill() })

		healthURL := fmt.Sprintf("http://127.0.0.1:%d%s", port, protocol.HealthPath)
		var healthy, reported time.Duration
		Eventually(func(g Gomega) {
			if healthy == 0 {
				resp, err := http.Get(healthURL)
				g.Expect(err).NotTo(HaveOccurred())
				resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
				healthy = time.Since(started)
			}
			var got corev1.Pod
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), &got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(jobset.EpochKey, "1"))
			reported = time.Since(started)
		}).WithTimeout(timeout).WithPolling(5 * time.Millisecond).Should(Succeed())

		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		Expect(err).NotTo(HaveOccurred())
		rss, peak := procKiB(string(status), "VmRSS:"), procKiB(string(status), "VmHWM:")
		info, err := os.Stat(bin)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("agent", fmt.Sprintf("healthy after %v, epoch reported after %v, RSS %d KiB (peak %d KiB), binary %.1f MiB",
			healthy.Round(time.Millisecond), reported.Round(time.Millisecond), rss, peak, float64(info.Size())/(1<<20)))
		// Budgets with room for a loaded machine; docs/explanation/in-place-restart.md
		// has the numbers measured here.
		Expect(reported).To(BeNumerically("<", 5*time.Second), "start-up to the first epoch report")
		Expect(peak).To(BeNumerically("<", 64*1024), "peak resident memory, KiB")

		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(exited).WithTimeout(10*time.Second).Should(Receive(BeNil()), "SIGTERM ends the agent with exit code 0")
	})
})

// procKiB reads a "Name:   N kB" line of /proc/<pid>/status.
func procKiB(status, field string) int {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
