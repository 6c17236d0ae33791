package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller/decide"
)

// Direct reports: agents tell the controller's leader their epoch over
// HTTPS, authenticated by a projected token of the controller's audience
// bound to their Pod, and write nothing on their Pods.

// reportToken is a token of the Pod's service account for audience, bound
// to the Pod, as the kubelet projects the webhook's volume.
func reportToken(pod corev1.Pod, audience string) string {
	GinkgoHelper()
	spec := authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}
	if audience != "" {
		spec.Audiences = []string{audience}
	}
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// directAgent is the transport of the Pod's agent, reporting directly,
// with its broadcasts drained as an agent's loop drains them.
func directAgent(pod corev1.Pod, js *jobset.JobSet, dial func(context.Context, string, string) (net.Conn, error)) *agent.DirectTransport {
	GinkgoHelper()
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = podToken(pod)
	tok := reportToken(pod, protocol.ReportAudience)
	t := &agent.DirectTransport{
		KubeTransport: &agent.KubeTransport{Client: kubernetes.NewForConfigOrDie(agentCfg), Namespace: pod.Namespace, Pod: pod.Name, JobSet: js.Name, Log: GinkgoLogr},
		Token:         func() (string, error) { return tok, nil },
		Dial:          dial,
		FallbackAfter: time.Second,
	}
	tctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	updates, err := t.Broadcasts(tctx)
	Expect(err).NotTo(HaveOccurred())
	first := make(chan protocol.Broadcast, 1)
	go func() {
		for b := range updates {
			select {
			case first <- b:
			default:
			}
		}
	}()
	Eventually(first).WithTimeout(timeout).Should(Receive(), "no broadcast reached the agent")
	return t
}

// restartedAgent is the transport of the Pod's agent started again with its
// Pod in place, its endpoint remembered in mem: its broadcasts, and a count
// of the requests it sent the API server.
func restartedAgent(pod corev1.Pod, js *jobset.JobSet, mem agent.EndpointMemory) (*agent.DirectTransport, <-chan protocol.Broadcast, *atomic.Int32) {
	GinkgoHelper()
	var requests atomic.Int32
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = podToken(pod)
	agentCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	tok := reportToken(pod, protocol.ReportAudience)
	t := &agent.DirectTransport{
		KubeTransport: &agent.KubeTransport{Client: kubernetes.NewForConfigOrDie(agentCfg), Namespace: pod.Namespace, Pod: pod.Name, JobSet: js.Name, Log: GinkgoLogr},
		Token:         func() (string, error) { return tok, nil },
		FallbackAfter: time.Second,
		Memory:        mem,
	}
	tctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	updates, err := t.Broadcasts(tctx)
	Expect(err).NotTo(HaveOccurred())
	return t, updates, &requests
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// endpointOf is the report endpoint the JobSet's broadcast names.
func endpointOf(js *jobset.JobSet) protocol.ReportEndpoint {
	GinkgoHelper()
	var cm corev1.ConfigMap
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}, &cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey(protocol.KeyReportAddress))
	}).WithTimeout(timeout).Should(Succeed())
	b, err := protocol.DecodeBroadcast(cm.Data)
	Expect(err).NotTo(HaveOccurred())
	return b.Reports
}

// put sends a report to the endpoint with a raw token and returns the
// status and the answer's message.
func put(ep protocol.ReportEndpoint, token string, r protocol.Report) (int, string) {
	GinkgoHelper()
	body, err := json.Marshal(r)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "https://"+ep.Address+protocol.ReportPath, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := endpointClient(ep).Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var a protocol.ReportAnswer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.Message
}

func endpointClient(ep protocol.ReportEndpoint) *http.Client {
	GinkgoHelper()
	pool := x509Pool(ep.CA)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, ep.ServerName)}}
}

func status(js *jobset.JobSet) jobset.JobSetStatus {
	GinkgoHelper()
	var got jobset.JobSet
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
	return got.Status
}

// expectNoEpochOnPods checks that no agent wrote its Pod.
func expectNoEpochOnPods(pods []corev1.Pod) {
	GinkgoHelper()
	for _, p := range pods {
		var got corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&p), &got)).To(Succeed())
		Expect(got.Annotations).NotTo(HaveKey(jobset.EpochKey), "pod %s was written", p.Name)
	}
}

// syncedPair starts the direct agents of the JobSet's first two Pods and
// has them report epoch 1, until the controller syncs it.
func syncedPair(js *jobset.JobSet, pods []corev1.Pod) (a, b *agent.DirectTransport) {
	GinkgoHelper()
	a, b = directAgent(pods[0], js, nil), directAgent(pods[1], js, nil)
	Expect(a.ReportEpoch(ctx, 1)).To(Succeed())
	Expect(b.ReportEpoch(ctx, 1)).To(Succeed())
	Eventually(func() int32 { return status(js).SyncedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
	return a, b
}

var _ = Describe("direct reports", func() {
	It("sync a group with no Pod written, and refuse what the Pod's token does not allow", func() {
		js, pods := inPlaceJobSet("direct", 2)
		a, b := directAgent(pods[0], js, nil), directAgent(pods[1], js, nil)
		Expect(a.Direct()).To(BeTrue(), "the broadcast names no endpoint")
		Expect(a.ReportEpoch(ctx, 1)).To(Succeed())
		Expect(b.ReportEpoch(ctx, 1)).To(Succeed())
		Eventually(func() int32 { return status(js).SyncedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
		expectNoEpochOnPods(pods)

		ep := endpointOf(js)
		By("a token for another audience")
		code, msg := put(ep, reportToken(pods[0], ""), protocol.Report{JobSet: js.Name, Epoch: 1})
		Expect(code).To(Equal(http.StatusForbidden), msg)
		Expect(msg).To(ContainSubstring("audience"))

		By("no token")
		code, _ = put(ep, "", protocol.Report{JobSet: js.Name, Epoch: 1})
		Expect(code).To(Equal(http.StatusUnauthorized))

		By("an epoch the controller never broadcast")
		code, msg = put(ep, reportToken(pods[0], protocol.ReportAudience), protocol.Report{JobSet: js.Name, Epoch: 3})
		Expect(code).To(Equal(http.StatusForbidden), msg)
		Expect(msg).To(ContainSubstring("never broadcast"))
		Expect(status(js).DeprecatedEpoch).To(BeZero(), "a refused epoch deprecated the group's")

		By("a Pod of another JobSet reporting for this one")
		other, otherPods := inPlaceJobSet("other", 1)
		_ = other
		code, msg = put(ep, reportToken(otherPods[0], protocol.ReportAudience), protocol.Report{JobSet: js.Name, Epoch: 2})
		Expect(code).To(Equal(http.StatusForbidden), msg)

		By("a deleted Pod's token")
		gone := reportToken(pods[1], protocol.ReportAudience)
		Expect(k8sClient.Delete(ctx, &pods[1], client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() int {
			code, _ := put(ep, gone, protocol.Report{JobSet: js.Name, Epoch: 2})
			return code
		}).WithTimeout(timeout).Should(Equal(http.StatusForbidden))
		Expect(status(js).SyncedEpoch).To(Equal(int32(1)))
	})

	It("fall back to the Pod when the endpoint cannot be reached, in a group with direct and upstream agents", func() {
		js, pods := inPlaceJobSet("mixed", 3)
		blocked := func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("dropped by a NetworkPolicy")
		}
		direct, fallback := directAgent(pods[0], js, nil), directAgent(pods[1], js, blocked)
		Expect(direct.ReportEpoch(ctx, 1)).To(Succeed())
		Eventually(func() error { return fallback.ReportEpoch(ctx, 1) }).WithTimeout(timeout).Should(Succeed())
		Expect(fallback.Direct()).To(BeFalse(), "the agent still reports to an endpoint it cannot reach")
		// Upstream JobSet's agent writes its attempt, counted from 0.
		patch := client.MergeFrom(pods[2].DeepCopy())
		pods[2].Annotations[jobset.InPlaceRestartAttemptKey] = "0"
		Expect(k8sClient.Patch(ctx, &pods[2], patch)).To(Succeed())
		Eventually(func() int32 { return status(js).SyncedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))

		var got corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods[1]), &got)).To(Succeed())
		Expect(got.Annotations).To(HaveKeyWithValue(jobset.EpochKey, "1"), "the fallback did not write the Pod")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &got)).To(Succeed())
		Expect(got.Annotations).NotTo(HaveKey(jobset.EpochKey), "the direct agent wrote its Pod")
	})

	It("survive a change of leader in a synced group: no restart, the agents say their epochs again", func() {
		js, pods := inPlaceJobSet("steady", 2, func(js *jobset.JobSet) { js.Spec.FailurePolicy.MaxRestarts = 3 })
		// The agents run on, and say their epochs again to the next leader.
		syncedPair(js, pods)
		before := endpointOf(js)

		fw.StopManager()
		fw.StartManager(cfg)
		Eventually(func() string { return endpointOf(js).Session }).WithTimeout(timeout).ShouldNot(Equal(before.Session))
		// Past the new leader's grace, by which the agents must have said
		// their epochs again: a group it had not heard from would restart.
		Consistently(func() int32 { return status(js).Restarts }).WithTimeout(decide.ReportGrace+2*time.Second).Should(BeZero(),
			"the new leader restarted a synced group it had not heard from yet")
		Expect(status(js).SyncedEpoch).To(Equal(int32(1)))
		expectNoEpochOnPods(pods)
	})

	It("survive a change of leader between deprecate and sync: counted once, no barrier lifted early", func() {
		js, pods := inPlaceJobSet("failover", 2, func(js *jobset.JobSet) { js.Spec.FailurePolicy.MaxRestarts = 3 })
		a, b := syncedPair(js, pods)

		// Agent a starts a new epoch (its worker failed): the controller
		// deprecates the group's. A report the leader did not answer in
		// time, on a loaded machine, is sent again, as the agent does.
		Eventually(func() error { return a.ReportEpoch(ctx, 2) }).WithTimeout(timeout).Should(Succeed())
		Eventually(func() int32 { return status(js).DeprecatedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
		Expect(status(js).InPlaceRestarts).To(Equal(int32(1)))
		before := endpointOf(js)

		By("a new leader, which knows nothing of what the last was told")
		fw.StopManager()
		fw.StartManager(cfg)
		Eventually(func() string { return endpointOf(js).Session }).WithTimeout(timeout).ShouldNot(Equal(before.Session))
		// a says its epoch again by itself; b has not reached epoch 2.
		Consistently(func() int32 { return status(js).SyncedEpoch }).WithTimeout(2*time.Second).Should(Equal(int32(1)), "the barrier of epoch 2 lifted before every agent reached it")

		Eventually(func() error { return b.ReportEpoch(ctx, 2) }).WithTimeout(timeout).Should(Succeed())
		Eventually(func() int32 { return status(js).SyncedEpoch }).WithTimeout(timeout).Should(Equal(int32(2)))
		Expect(status(js).InPlaceRestarts).To(Equal(int32(1)), "the restart was counted again by the new leader")
		expectNoEpochOnPods(pods)
	})
})

var _ = Describe("the leader's broadcast stream", func() {
	It("carries a restart to an agent started again with its Pod in place, with no request to the API server, until the leader changes", func() {
		js, pods := inPlaceJobSet("follow", 2, func(js *jobset.JobSet) { js.Spec.FailurePolicy.MaxRestarts = 3 })
		_, b := syncedPair(js, pods)
		ep := endpointOf(js)

		By("agent a started again, its endpoint on its state volume")
		mem := &agent.EndpointInMemory{}
		Expect(mem.Remember(ep)).To(Succeed())
		a, updates, requests := restartedAgent(pods[0], js, mem)
		Eventually(updates).WithTimeout(timeout).Should(Receive(HaveField("SyncedEpoch", int32(1))))
		Expect(a.Direct()).To(BeTrue())
		Expect(a.ReportEpoch(ctx, 2)).To(Succeed())
		Eventually(updates).WithTimeout(timeout).Should(Receive(HaveField("DeprecatedEpoch", int32(1))), "the deprecation did not reach the restarted agent")
		Expect(b.ReportEpoch(ctx, 2)).To(Succeed())
		Eventually(updates).WithTimeout(timeout).Should(Receive(HaveField("SyncedEpoch", int32(2))), "the release did not reach the restarted agent")
		Expect(requests.Load()).To(BeZero(), "the restarted agent sent the API server requests: it should follow the leader's stream")
		expectNoEpochOnPods(pods)

		By("a new leader: the stream ends and the agent watches its broadcast")
		fw.StopManager()
		fw.StartManager(cfg)
		Eventually(updates).WithTimeout(timeout).Should(Receive(HaveField("Reports.Session", Not(Equal(ep.Session)))), "the new leader's broadcast did not reach the restarted agent")
		Expect(requests.Load()).To(BeNumerically(">=", 1), "the agent learnt of the new leader without watching")
	})
})

func x509Pool(pemCA string) *x509.CertPool {
	GinkgoHelper()
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM([]byte(pemCA))).To(BeTrue())
	return pool
}

func tlsConfig(pool *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}
}
