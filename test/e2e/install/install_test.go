package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/webhook/certs"
	"github.com/inplace-dev/inplace/webhook/selfsigned"
)

const (
	timeout   = 3 * time.Minute
	namespace = "inplace-system"
)

// The commands of the README and docs/how-to/install.md, run as written (a test
// checks that the docs still say them).
const (
	applyDefault      = "kubectl apply --server-side -k config/default"
	applySelfSigned   = "kubectl apply --server-side -k config/selfsigned"
	rolloutStatus     = "kubectl -n inplace-system rollout status deploy/inplace-manager"
	rolloutWebhook    = "kubectl -n inplace-system rollout status deploy/inplace-webhook"
	helmInstall       = "helm install inplace charts/inplace -n inplace-system --create-namespace --set certManager.enabled=false,webhook.replicas=1"
	labelNamespace    = "kubectl label ns inplace-system pod-security.kubernetes.io/enforce=restricted inplace.dev/webhooks=disabled"
	webhooksAnswer    = "kubectl apply --dry-run=server -f examples/startup-policy/driver-then-workers.yaml"
	deleteDefault     = "kubectl delete -k config/default"
	deleteSelfSigned  = "kubectl delete -k config/selfsigned"
	helmUninstall     = "helm uninstall inplace -n inplace-system"
	applyRelease      = "kubectl apply --server-side -f dist/install.yaml"
	pushRelease       = "make push"
	deleteRelease     = "kubectl delete -f dist/install.yaml"
	krewInstall       = "kubectl krew install --manifest=dist/inplace.krew.yaml"
	mutatingWebhook   = "inplace-mutating-webhook"
	validatingWebhook = "inplace-validating-webhook"
)

// docOutputs are lines the docs show a command printing, on
// docs/how-to/install.md or, for the upgrade's commands, upgrade.md: the
// specs check that the command prints them (shDoc), and the docs spec
// that the page still shows them.
var docOutputs = map[string][]string{
	applyDefault:     {"namespace/inplace-system serverside-applied", "validatingwebhookconfiguration.admissionregistration.k8s.io/inplace-validating-webhook serverside-applied"},
	applySelfSigned:  {"namespace/inplace-system serverside-applied", "clusterrole.rbac.authorization.k8s.io/inplace-webhook-cabundle serverside-applied"},
	rolloutStatus:    {`deployment "inplace-manager" successfully rolled out`},
	rolloutWebhook:   {`deployment "inplace-webhook" successfully rolled out`},
	webhooksAnswer:   {"jobset.jobset.x-k8s.io/driver-then-workers created (server dry run)"},
	labelNamespace:   {"namespace/inplace-system labeled"},
	helmInstall:      {"STATUS: deployed"},
	deleteDefault:    {`namespace "inplace-system" deleted`},
	deleteSelfSigned: {`namespace "inplace-system" deleted`},
	helmUninstall:    {`release "inplace" uninstalled`},
	applyCRDs:        {"customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io serverside-applied"},
	checkVersion:     {"inplace-manager v"},
	describePolicy:   {"Rego:               compiles"},
	getPolicies:      {"NAME           ACTION   READY   VIOLATIONS   AGE"},
}

// shDoc runs a command of docs/how-to/install.md, with flags appended,
// and checks that it prints what the page shows.
func shDoc(command, flags string) string {
	GinkgoHelper()
	out := sh(command + flags)
	for _, line := range docOutputs[command] {
		Expect(out).To(ContainSubstring(line), "%q prints what docs/how-to/install.md shows", command)
	}
	return out
}

// releaseVersion is the release the specs build: a tag of its own, since
// the local cluster's images are tagged with the tree's version
// (images.Version) and the release's must come from its archives alone.
const releaseVersion = images.Version + "-e2e"

// sh runs a command line as a person would in a shell at the repository's
// root, with the cluster's kubeconfig and the kubectl and helm this
// project builds first on the PATH.
func sh(line string) string {
	GinkgoHelper()
	return shWithin(timeout, line)
}

// goCaches are GOCACHE, GOMODCACHE and GOPATH as go reports them for the
// user running the tests, which are under HOME unless set.
var goCaches = sync.OnceValue(func() []string {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		return nil
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(vals) != 3 {
		return nil
	}
	return []string{"GOCACHE=" + vals[0], "GOMODCACHE=" + vals[1], "GOPATH=" + vals[2]}
})

// shInDir is sh in dir rather than at the repository's root.
func shInDir(dir, line string) string {
	GinkgoHelper()
	return sh("cd " + dir + " && " + line)
}

// shWithin is sh with a time limit of its own.
func shWithin(limit time.Duration, line string) string {
	GinkgoHelper()
	out, err := runLine(limit, line)
	Expect(err).NotTo(HaveOccurred(), "%s:\n%s", line, out)
	return out
}

// runLine runs a command line as sh does, and returns what it printed and
// its error.
func runLine(limit time.Duration, line string) (string, error) {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	tools := GinkgoT().TempDir()
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Symlink(toolBinary(root, "HELM", "helm"), filepath.Join(tools, "helm"))).To(Succeed())
	// kubectl and ctr are the cluster's own, built into bin/: the host
	// need not have either.
	for _, name := range []string{"kubectl", "ctr"} {
		Expect(os.Symlink(filepath.Join(bin, name), filepath.Join(tools, name))).To(Succeed())
	}

	cmdCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, "sh", "-c", line)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+fw.Cluster.Kubeconfig, "PATH="+tools+":"+os.Getenv("PATH"), "HOME="+tools)
	// HOME is a new one, for helm's and kubectl's own files; go (make
	// release) keeps the caches of the user it runs as.
	cmd.Env = append(cmd.Env, goCaches()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	GinkgoWriter.Printf("$ %s\n%s", line, out.String())
	return out.String(), err
}

// toolBinary is a tool the Makefile builds into bin/ with its version in
// its name: the one make names in env (make test exports it), else the
// one in bin/.
func toolBinary(root, env, name string) string {
	GinkgoHelper()
	if path := os.Getenv(env); path != "" {
		return path
	}
	found, _ := filepath.Glob(filepath.Join(root, "bin", name+"-*"))
	Expect(found).To(HaveLen(1), "want one %s in bin/: remove the others, or run 'make %[1]s'", name)
	return found[0]
}

// expectWebhooksPointAtTheService checks that both webhook configurations
// reached the apiserver with their clientConfig: the manager's Service.
func expectWebhooksPointAtTheService() {
	GinkgoHelper()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: mutatingWebhook}, &m)).To(Succeed())
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: validatingWebhook}, &v)).To(Succeed())
	var services []*admissionregistrationv1.ServiceReference
	for _, w := range m.Webhooks {
		services = append(services, w.ClientConfig.Service)
	}
	for _, w := range v.Webhooks {
		services = append(services, w.ClientConfig.Service)
	}
	Expect(services).NotTo(BeEmpty())
	for _, s := range services {
		Expect(s).To(HaveValue(And(HaveField("Name", "inplace-webhook-service"), HaveField("Namespace", namespace))))
	}
}

// issueAsCertManager does what cert-manager's controller and CA injector
// do for the Certificate config/ ships (neither can be built here): a
// serving certificate for the Certificate's DNS names in its Secret, and
// its CA in the webhook configurations that ask for injection.
func issueAsCertManager() {
	GinkgoHelper()
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "inplace-serving-cert"}, cert)).To(Succeed())
	dnsNames, _, err := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	Expect(err).NotTo(HaveOccurred())
	secretName, _, err := unstructured.NestedString(cert.Object, "spec", "secretName")
	Expect(err).NotTo(HaveOccurred())
	ca, err := certs.NewCA("inplace-selfsigned-issuer")
	Expect(err).NotTo(HaveOccurred())
	crt, key, err := ca.Sign(certs.Leaf{CommonName: dnsNames[0], Hosts: dnsNames})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM},
	})).To(Succeed())
	Expect(selfsigned.PatchCABundle(ctx, k8sClient, ca.PEM, mutatingWebhook, validatingWebhook)).To(Succeed())
}

// killManager kills the leading JobSet controller's container with
// SIGKILL, as a crash or the OOM killer would: its kubelet starts it again,
// and whichever replica takes the dead one's lease once it expires finishes
// the restart.
func killManager() {
	GinkgoHelper()
	p := leaderPod(Default)
	Expect(p.Labels).To(HaveKeyWithValue("app.kubernetes.io/component", "manager"), "the Lease inplace-manager is held by another component")
	Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	Expect(fw.Cluster.KillContainer(ctx, p.Spec.NodeName, p.Status.ContainerStatuses[0].ContainerID)).To(Succeed())
}

// runsAJobSetInPlace is a user's JobSet on the installed manager: its
// webhook injects the agent, the controller runs the epochs, and a worker's
// exit restarts both Pods in place on the real kubelet; with
// killMidRestart, the manager is killed once the restart began, and the
// next one finishes it. The JobSet is deleted at the end, before inplace is
// uninstalled, as docs/how-to/install.md says.
func runsAJobSetInPlace(name string, killMidRestart bool, agentImage string) {
	GinkgoHelper()
	shDoc(webhooksAnswer, "")
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	js := util.WorkerJobSet(name, ns.Name, 2, nil)
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	before := util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
	expectAgent(js, agentImage)
	util.ExitWorker(ctx, fw.Cluster.Kubeconfig, util.JobSetPods(ctx, k8sClient, js)[0], 1)
	if killMidRestart {
		Eventually(func() int32 { return util.GetJobSet(ctx, k8sClient, js).Status.DeprecatedEpoch }).WithTimeout(timeout).Should(Equal(int32(1)))
		killManager()
		Expect(util.GetJobSet(ctx, k8sClient, js).Status.SyncedEpoch).To(Equal(int32(1)), "the restart ended before the manager was killed")
	}
	Expect(util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 2, timeout)).To(Equal(before), "same Pods, same IPs")
	Expect(util.GetJobSet(ctx, k8sClient, js).Status.InPlaceRestarts).To(Equal(int32(1)))

	deleteJobSet(js)
}

// deleteJobSet deletes js with its Jobs and Pods, and waits until it is
// gone.
func deleteJobSet(js *jobset.JobSet) {
	GinkgoHelper()
	Expect(k8sClient.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &jobset.JobSet{})
	}).WithTimeout(timeout).Should(Satisfy(apierrors.IsNotFound), "%s is gone", js.Name)
}

// expectDeploymentsRun checks that both Deployments of the install run
// image.
func expectDeploymentsRun(image string) {
	GinkgoHelper()
	for _, d := range []string{"inplace-manager", "inplace-webhook"} {
		var dep appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: d}, &dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.Containers).To(HaveExactElements(HaveField("Image", image)), "%s runs %s", d, image)
	}
}

// leaderPod is the Pod that holds the JobSet controller's Lease.
func leaderPod(g Gomega) corev1.Pod {
	var lease coordinationv1.Lease
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "inplace-manager"}, &lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil(), "no controller leads")
	leader, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	var p corev1.Pod
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leader}, &p)).To(Succeed())
	return p
}

// killAndWaitReady kills the one container of p with SIGKILL, as a crash
// would, and waits until its kubelet has started it again and it is ready.
func killAndWaitReady(p corev1.Pod) {
	GinkgoHelper()
	Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	Expect(fw.Cluster.KillContainer(ctx, p.Spec.NodeName, p.Status.ContainerStatuses[0].ContainerID)).To(Succeed())
	Eventually(func(g Gomega) {
		var now corev1.Pod
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&p), &now)).To(Succeed())
		g.Expect(now.Status.ContainerStatuses).To(HaveExactElements(And(HaveField("RestartCount", BeNumerically(">", p.Status.ContainerStatuses[0].RestartCount)), HaveField("Ready", BeTrue()))))
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), "%s restarted and ready", p.Name)
}

// pushedDigests reads what make push printed: each image it pushed, by
// reference and digest ("pushed REF@DIGEST").
func pushedDigests(out string) map[string]string {
	GinkgoHelper()
	digests := map[string]string{}
	for line := range strings.Lines(out) {
		pushed, ok := strings.CutPrefix(strings.TrimSpace(line), "pushed ")
		if !ok {
			continue
		}
		ref, digest, ok := strings.Cut(pushed, "@")
		Expect(ok).To(BeTrue(), "make push printed %q: no digest", line)
		digests[ref] = digest
	}
	return digests
}

// expectRunsPushed checks that every Pod of the install that matches
// selector runs image, and that its kubelet pulled the digest pushed.
func expectRunsPushed(selector map[string]string, image, digest string) {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(selector))).To(Succeed())
	Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			Expect(c.Image).To(Equal(image), "%s/%s", p.Name, c.Name)
			Expect(c.ImageID).To(HaveSuffix("@"+digest), "%s/%s runs the image pushed", p.Name, c.Name)
		}
	}
}

// webhookFailover bounds how long admission requests fail after a webhook
// replica dies (docs/how-to/operate.md, "A webhook replica dies"). The
// local cluster's API server dials a Service's ready endpoints itself
// (endpoint routing, no kube-proxy); the killed replica's endpoint leaves
// them once its kubelet's relist (about 1 s) sees the container gone, its
// status is written, the EndpointSlice controller updates the slice and
// the API server's watch delivers it. Runs took 0.1–0.5 s: 5 s is a
// generous bound, not a derived one.
const webhookFailover = 5 * time.Second

// survivesAWebhookReplicaKilled kills each webhook replica's container in
// turn, the next once the first is ready again, while clients create
// JobSets with a server-side dry run: whichever replica the API server's
// connection leads to is killed once. Every create refused is refused for
// the failed webhook call, within webhookFailover of a kill, and creates
// are admitted again afterwards.
func survivesAWebhookReplicaKilled(clients int) {
	GinkgoHelper()
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	type outcome struct {
		at  time.Time
		err error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	load, stop := context.WithCancel(ctx)
	defer stop()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for load.Err() == nil {
				js := util.WorkerJobSet(fmt.Sprintf("load-%d", i), ns.Name, 2, nil)
				err := k8sClient.Create(load, js, client.DryRunAll)
				if load.Err() != nil {
					return
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{time.Now(), err})
				mu.Unlock()
			}
		}()
	}
	admitted := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outcomes {
			if o.err == nil {
				n++
			}
		}
		return n
	}
	Eventually(admitted).WithTimeout(timeout).Should(BeNumerically(">=", 20), "creates admitted before any kill")

	replicas := webhookPods()
	Expect(replicas).To(HaveLen(2), "config/default runs two webhook replicas")
	expectWebhookEndpointsReady(len(replicas))
	var kills []time.Time
	for _, p := range replicas {
		kills = append(kills, time.Now())
		killAndWaitReady(p)
		// Back in the Service before the next kill, so that the next one
		// is a failover to it and not an outage.
		expectWebhookEndpointsReady(len(replicas))
	}
	afterKills := admitted()
	Eventually(admitted).WithTimeout(timeout).Should(BeNumerically(">=", afterKills+20), "creates admitted after both kills")
	stop()
	wg.Wait()

	var refused []outcome
	for _, o := range outcomes {
		if o.err != nil {
			refused = append(refused, o)
		}
	}
	// Each replica was killed once, the one the API server's connections
	// lead to among them: some creates must have met a kill.
	Expect(refused).NotTo(BeEmpty(), "no create met a killed replica: the spec did not exercise a failover")
	for _, o := range refused {
		Expect(o.err.Error()).To(ContainSubstring("failed calling webhook"), "a create refused for another reason than the killed replica")
		Expect(o.err.Error()).NotTo(ContainSubstring("no endpoints available"), "no replica was in the Service: an outage, not a failover")
		Expect(kills).To(ContainElement(Satisfy(func(k time.Time) bool {
			return !o.at.Before(k) && o.at.Sub(k) <= webhookFailover
		})), "a create refused %v after the first kill, not within %v of a kill: %v", o.at.Sub(kills[0]), webhookFailover, o.err)
	}
	figures := fmt.Sprintf("%d clients, %d creates, %d refused", clients, len(outcomes), len(refused))
	for i, k := range kills {
		var last time.Duration
		n := 0
		for _, o := range refused {
			if d := o.at.Sub(k); d >= 0 && (i+1 == len(kills) || o.at.Before(kills[i+1])) {
				n, last = n+1, d
			}
		}
		figures += fmt.Sprintf("; kill %d: %d refused, the last %v after it", i+1, n, last.Round(time.Millisecond))
	}
	AddReportEntry("webhook replicas killed under load", figures, ReportEntryVisibilityAlways)
}

// webhookPods are the running replicas of the webhook's Deployment.
func webhookPods() []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "webhook"})).To(Succeed())
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	return running
}

// expectWebhookEndpointsReady waits until the webhook Service's
// EndpointSlices list n ready endpoints.
func expectWebhookEndpointsReady(n int) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var slices discoveryv1.EndpointSliceList
		g.Expect(k8sClient.List(ctx, &slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: "inplace-webhook-service"})).To(Succeed())
		ready := 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
		g.Expect(ready).To(Equal(n))
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), "the webhook Service lists %d ready endpoints", n)
}

// expectUninstalled waits until the install's namespace is gone.
func expectUninstalled() {
	GinkgoHelper()
	Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
	}).WithTimeout(timeout).Should(Satisfy(apierrors.IsNotFound), "namespace %s is gone", namespace)
}

var _ = Describe("installing inplace", Ordered, func() {
	// The tree's release, which the release spec builds and pushes and
	// the upgrade spec upgrades to.
	var current releaseFiles
	BeforeAll(func() {
		current = newReleaseFiles()
	})

	It("the docs say the commands these specs run", func() {
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		readme, err := os.ReadFile(filepath.Join(root, "README.md"))
		Expect(err).NotTo(HaveOccurred())
		install, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "install.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(readme)).To(And(ContainSubstring(applyDefault), ContainSubstring(rolloutStatus), ContainSubstring(rolloutWebhook)))
		for _, c := range []string{applyDefault, applySelfSigned, rolloutStatus, rolloutWebhook, helmInstall, labelNamespace, webhooksAnswer, deleteDefault, deleteSelfSigned, helmUninstall} {
			Expect(string(install)).To(ContainSubstring(c))
			for _, line := range docOutputs[c] {
				Expect(string(install)).To(ContainSubstring(line), "docs/how-to/install.md shows what %q prints", c)
			}
		}
		upgrade, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "upgrade.md"))
		Expect(err).NotTo(HaveOccurred())
		for _, c := range []string{applyCRDs, applyRelease, rolloutStatus, rolloutWebhook, checkVersion, crdEvents, getPolicies, savePolicy, describePolicy, "## Rolling back"} {
			Expect(string(upgrade)).To(ContainSubstring(c), "docs/how-to/upgrade.md says what the upgrade spec runs")
			for _, line := range docOutputs[c] {
				Expect(string(upgrade)).To(ContainSubstring(line), "docs/how-to/upgrade.md shows what %q prints", c)
			}
		}
		changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(changelog)).To(And(ContainSubstring("## "+previousRelease.version+"\n"), ContainSubstring(previousRelease.commit)), "the CHANGELOG names the previous release's commit, which the upgrade spec builds")
		release, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "release.md"))
		Expect(err).NotTo(HaveOccurred())
		// The docs name the tree's version; the spec below builds its own.
		for _, c := range []string{"make release VERSION=" + images.Version, applyRelease, deleteRelease, rolloutStatus, rolloutWebhook, "sha256sum -c SHA256SUMS", pushRelease + " REGISTRY=", "MANIFESTS=",
			releaseCommand(helmPushRelease, images.Version), releaseCommand(helmInstallRelease, images.Version), releaseCommand(ctrImportManager, images.Version), releaseCommand(ctrImportAgent, images.Version), ctrListImages, krewInstall} {
			Expect(string(release)).To(ContainSubstring(c))
		}
	})

	It("with kustomize and cert-manager, the README's command: the apiserver takes every object, the manager serves its webhooks from the cluster, and admission holds while a webhook replica dies under load", func() {
		shDoc(applyDefault, "")
		expectWebhooksPointAtTheService()
		issueAsCertManager()
		shDoc(rolloutStatus, " --timeout=3m")
		shDoc(rolloutWebhook, " --timeout=3m")
		runsAJobSetInPlace("kustomize", false, images.Agent)
		survivesAWebhookReplicaKilled(8)
		shDoc(deleteDefault, "")
		expectUninstalled()
	})

	It("with kustomize, without cert-manager: the manager signs its own certificate, and one killed in the middle of an in-place restart is replaced by one that finishes it", func() {
		shDoc(applySelfSigned, "")
		expectWebhooksPointAtTheService()
		shDoc(rolloutStatus, " --timeout=3m")
		shDoc(rolloutWebhook, " --timeout=3m")
		runsAJobSetInPlace("selfsigned", true, images.Agent)
		shDoc(deleteSelfSigned, "")
		expectUninstalled()
	})

	It("from a release: make release's archives pushed to the cluster's registry, install.yaml pointed at it, on a node that never had its images", func() {
		dist := current.dist
		shWithin(10*time.Minute, makeRelease(releaseVersion, dist))
		shInDir(dist, "sha256sum -c SHA256SUMS")
		for _, f := range []string{"install.yaml", "install-selfsigned.yaml", "jobset-crd.yaml", "inplace.krew.yaml", "images.txt"} {
			Expect(filepath.Join(dist, f)).To(BeAnExistingFile())
		}
		// The kubectl plugin, from its archive, found by kubectl on the PATH.
		plugin := GinkgoT().TempDir()
		sh(fmt.Sprintf("tar -xzf %s -C %s", filepath.Join(dist, fmt.Sprintf("kubectl-inplace_%s_linux_%s.tar.gz", releaseVersion, runtime.GOARCH)), plugin))
		Expect(sh(fmt.Sprintf("PATH=%s:$PATH kubectl inplace version", plugin))).To(ContainSubstring(releaseVersion))
		// With krew, from the release's manifest, offline; kubectl runs
		// krew as its plugin kubectl-krew.
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		krewRoot, krewTools := GinkgoT().TempDir(), GinkgoT().TempDir()
		Expect(os.Symlink(toolBinary(root, "KREW", "krew"), filepath.Join(krewTools, "kubectl-krew"))).To(Succeed())
		archive := fmt.Sprintf("--archive=dist/kubectl-inplace_%s_linux_%s.tar.gz", releaseVersion, runtime.GOARCH)
		Expect(sh(fmt.Sprintf("KREW_ROOT=%s PATH=%s:$PATH %s", krewRoot, krewTools, inRelease(krewInstall+" "+archive, current)))).To(ContainSubstring("Installed plugin: inplace"))
		Expect(sh(fmt.Sprintf("PATH=%s/bin:$PATH kubectl inplace version", krewRoot))).To(ContainSubstring(releaseVersion), "kubectl runs the plugin krew installed")
		sh("helm lint " + filepath.Join(dist, "inplace-"+strings.TrimPrefix(releaseVersion, "v")+".tgz"))

		// The images reach the node as a cluster's do: pushed to a registry,
		// pulled by the kubelet. The local cluster imports its own, under
		// another name and tag.
		registry := fw.Cluster.Registry + "/ml"
		manifests := current.manifests
		pushed := sh(makePush(registry, current))
		digests := pushedDigests(pushed)
		manager, agent := registry+"/inplace-manager:"+releaseVersion, registry+"/inplace-agent:"+releaseVersion
		Expect(digests).To(HaveKey(manager))
		Expect(digests).To(HaveKey(agent))
		sh(strings.Replace(applyRelease, "dist/", manifests+"/", 1))
		expectWebhooksPointAtTheService()
		issueAsCertManager()
		shDoc(rolloutStatus, " --timeout=3m")
		shDoc(rolloutWebhook, " --timeout=3m")
		expectDeploymentsRun(manager)
		expectRunsPushed(map[string]string{"app.kubernetes.io/name": "inplace"}, manager, digests[manager])
		Expect(sh("kubectl -n inplace-system exec deploy/inplace-manager -- /inplace-manager --version")).To(ContainSubstring(releaseVersion), "the binary says its release")
		runsAJobSetInPlace("release", false, agent)
		drillsTheRunbook(dist)
		sh(strings.Replace(deleteRelease, "dist/", manifests+"/", 1))
		expectUninstalled()
	})

	It("upgraded from the previous release while InPlaceRestart JobSets run, and rolled back: nothing restarts or is recreated, and a failure after each restarts in place", func() {
		upgradesAndRollsBack(current)
	})

	It("from a release with Helm: its chart pushed to the cluster's registry and installed from the archive, the images pulled from the registry; then the images imported into a node's containerd", func() {
		installsTheReleaseWithHelm(current)
	})

	It("with Helm, without cert-manager", func() {
		shDoc(helmInstall, " --wait --timeout=3m")
		shDoc(labelNamespace, "")
		expectWebhooksPointAtTheService()
		runsAJobSetInPlace("helm", false, images.Agent)
		shDoc(helmUninstall, " --wait")
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		expectUninstalled()
	})
})
