package install

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/util"
)

// previousRelease is the release before the tree's, as the CHANGELOG names
// it: the upgrade spec builds it from its commit, with that commit's own
// make release and make push.
var previousRelease = struct{ version, commit string }{
	version: "v0.9.0",
	commit:  "1c7377d12d634a737bb5e520eefb9ab08af5f85a",
}

// The commands of docs/how-to/upgrade.md beyond install.md's, run as
// written with dist/ standing for the release's files.
const (
	applyCRDs      = "kubectl apply --server-side --force-conflicts -f dist/jobset-crd.yaml"
	checkVersion   = "kubectl -n inplace-system exec deploy/inplace-manager -- /inplace-manager --version"
	crdEvents      = "kubectl get events -n default --field-selector involvedObject.name=jobsets.jobset.x-k8s.io"
	getPolicies    = "kubectl get jobsetpolicies"
	savePolicy     = "kubectl get jobsetpolicy NAME -o yaml > NAME.yaml"
	describePolicy = "inplacectl policy describe -f NAME.yaml"
)

// releaseFiles are where a release was written (make release's
// RELEASE_DIR) and where make push wrote its install manifests, pointed at
// the registry it pushed to (MANIFESTS).
type releaseFiles struct{ dist, manifests string }

// newReleaseFiles makes the two directories, removed once the ordered
// specs have run.
func newReleaseFiles() releaseFiles {
	GinkgoHelper()
	var f releaseFiles
	for _, dir := range []*string{&f.dist, &f.manifests} {
		d, err := os.MkdirTemp("", "inplace-release-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, d)
		*dir = d
	}
	return f
}

// makeRelease is make release of version into dist, for the host's
// platform alone: the test runs here.
func makeRelease(version, dist string) string {
	return fmt.Sprintf("make release VERSION=%s RELEASE_DIR=%s RELEASE_PLATFORMS=linux/%[3]s RELEASE_CLI_PLATFORMS=linux/%[3]s", version, dist, runtime.GOARCH)
}

// makePush is make push of the release in f to registry, writing its
// install manifests into f.manifests.
func makePush(registry string, f releaseFiles) string {
	return fmt.Sprintf("%s REGISTRY=%s RELEASE_DIR=%s MANIFESTS=%s", pushRelease, registry, f.dist, f.manifests)
}

// inRelease is a documented command with dist/ standing for f: the CRDs
// from the release itself, the install manifest from the one make push
// pointed at the registry.
func inRelease(command string, f releaseFiles) string {
	command = strings.Replace(command, "dist/install.yaml", filepath.Join(f.manifests, "install.yaml"), 1)
	return strings.ReplaceAll(command, "dist/", f.dist+"/")
}

// buildPrevious builds the previous release as its maintainers did: a
// checkout of its commit (a clone sharing this repository's objects:
// nothing is fetched), its own make release, and its own make push to
// registry.
func buildPrevious(registry string) releaseFiles {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", previousRelease.commit+"^{commit}").CombinedOutput(); err != nil {
		Fail(fmt.Sprintf("the commit of %s, %s, is not in this repository (a shallow clone? run 'git fetch --unshallow'): %v: %s",
			previousRelease.version, previousRelease.commit, err, out))
	}
	tree := GinkgoT().TempDir()
	sh(fmt.Sprintf("git clone -q --shared --no-checkout . %s && git -C %[1]s checkout -q --detach %s", tree, previousRelease.commit))
	// The tools this checkout built (kustomize, helm) serve it too.
	Expect(os.Symlink(filepath.Join(root, "bin"), filepath.Join(tree, "bin"))).To(Succeed())
	f := releaseFiles{dist: GinkgoT().TempDir(), manifests: GinkgoT().TempDir()}
	shWithin(10*time.Minute, "cd "+tree+" && "+makeRelease(previousRelease.version, f.dist))
	shInDir(tree, makePush(registry, f))
	return f
}

// expectRelease waits for both Deployments to roll out, then checks that
// the manager says version and that the JobSet controller's leader runs
// the manager's image of that release.
func expectRelease(version, managerImage string) {
	GinkgoHelper()
	shDoc(rolloutStatus, " --timeout=3m")
	shDoc(rolloutWebhook, " --timeout=3m")
	// kubectl exec picks one of the Deployment's Pods: one of the last
	// release may still be terminating.
	Eventually(func(g Gomega) {
		out, err := runLine(timeout, checkVersion)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(docOutputs[checkVersion][0] + strings.TrimPrefix(version, "v") + " (commit "))
	}).WithTimeout(timeout).Should(Succeed(), "the manager says its release, %s", version)
	Eventually(func(g Gomega) {
		g.Expect(leaderPod(g).Spec.Containers).To(HaveExactElements(HaveField("Image", managerImage)))
	}).WithTimeout(timeout).Should(Succeed(), "the JobSet controller's leader runs %s", managerImage)
}

// runState is what an upgrade must leave alone in a running JobSet: each
// Pod and Job (by UID), each container's restarts, and the JobSet's
// counters and epochs.
func runState(js *jobset.JobSet) map[string]string {
	GinkgoHelper()
	state := map[string]string{}
	got := util.GetJobSet(ctx, k8sClient, js)
	st := got.Status
	state["jobset"] = fmt.Sprintf("restarts=%d inPlaceRestarts=%d syncedEpoch=%d deprecatedEpoch=%d", st.Restarts, st.InPlaceRestarts, st.SyncedEpoch, st.DeprecatedEpoch)
	var jobs batchv1.JobList
	Expect(k8sClient.List(ctx, &jobs, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	for _, j := range jobs.Items {
		state["job/"+j.Name] = string(j.UID)
	}
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		restarts := []string{string(p.UID)}
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			restarts = append(restarts, fmt.Sprintf("%s=%d", c.Name, c.RestartCount))
		}
		state["pod/"+p.Name] = strings.Join(restarts, " ")
	}
	return state
}

// expectPolicyEnforced checks that the webhooks enforce the example
// policy max-restarts: a JobSet asking for more restarts than it allows,
// in a namespace it matches, is refused, by the webhook replicas of the
// release just rolled out.
func expectPolicyEnforced(ns string) {
	GinkgoHelper()
	js := util.WorkerJobSet("too-many-restarts", ns, 2, nil)
	js.Spec.FailurePolicy.MaxRestarts = 30
	Eventually(func() error {
		return k8sClient.Create(ctx, js.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).Should(MatchError(ContainSubstring("above this cluster's limit of 20")), "the webhooks deny what max-restarts denies")
}

// expectNoCRDEventsSince checks, as upgrade.md's step 4 does with
// kubectl, that no Event on the JobSet CRD since start says the manager
// holds back.
func expectNoCRDEventsSince(start time.Time) {
	GinkgoHelper()
	Expect(sh(crdEvents)).NotTo(ContainSubstring("Error"))
	var events corev1.EventList
	Expect(k8sClient.List(ctx, &events, client.InNamespace("default"))).To(Succeed())
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "jobsets.jobset.x-k8s.io" && !e.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			Fail(fmt.Sprintf("an Event on the CRD since the manager rolled out: %s %s: %s", e.Type, e.Reason, e.Message))
		}
	}
}

// restartsInPlace fails a worker of js, running at epoch-1, and checks
// that every Pod restarts in place at epoch, counted once.
func restartsInPlace(js *jobset.JobSet, epoch int32) {
	GinkgoHelper()
	before := util.ExpectWorkersRunning(ctx, k8sClient, js, 2, epoch-1, timeout)
	inPlace := util.GetJobSet(ctx, k8sClient, js).Status.InPlaceRestarts
	util.ExitWorker(ctx, fw.Cluster.Kubeconfig, util.JobSetPods(ctx, k8sClient, js)[0], 1)
	Expect(util.ExpectWorkersRunning(ctx, k8sClient, js, 2, epoch, timeout)).To(Equal(before), "%s: same Pods, same IPs", js.Name)
	Expect(util.GetJobSet(ctx, k8sClient, js).Status.InPlaceRestarts).To(Equal(inPlace+1), "%s: one in-place restart", js.Name)
}

// expectAgent checks that every Pod of js runs image as its agent.
func expectAgent(js *jobset.JobSet, image string) {
	GinkgoHelper()
	for _, p := range util.JobSetPods(ctx, k8sClient, js) {
		Expect(p.Spec.InitContainers).To(ContainElement(And(HaveField("Name", "inplace-agent"), HaveField("Image", image))), "%s runs the agent %s", p.Name, image)
	}
}

// upgradesAndRollsBack installs the previous release, runs two
// InPlaceRestart JobSets on it (container and process scope), upgrades to
// the tree's release (built and pushed into current) with upgrade.md's
// commands while they run, then rolls back with the same commands and the
// previous release's files. Neither move restarts or recreates anything;
// a failure after each restarts in place, with the agents the Pods were
// admitted with.
func upgradesAndRollsBack(current releaseFiles) {
	GinkgoHelper()
	Expect(filepath.Join(current.manifests, "install.yaml")).To(BeAnExistingFile(), "the release spec built and pushed the tree's release")
	registry := fw.Cluster.Registry + "/ml"
	previous := buildPrevious(registry)
	previousManager, previousAgent := registry+"/inplace-manager:"+previousRelease.version, registry+"/inplace-agent:"+previousRelease.version
	currentManager, currentAgent := registry+"/inplace-manager:"+releaseVersion, registry+"/inplace-agent:"+releaseVersion

	By("installing " + previousRelease.version + " and running two JobSets on it")
	sh(inRelease(applyRelease, previous))
	expectWebhooksPointAtTheService()
	issueAsCertManager()
	expectRelease(previousRelease.version, previousManager)
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	containerScope := util.WorkerJobSet("container", ns.Name, 2, nil)
	processScope := util.SetRestartScope(util.WorkerJobSet("process", ns.Name, 2, nil), protocol.RestartScopeProcess)
	for _, js := range []*jobset.JobSet{containerScope, processScope} {
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
		expectAgent(js, previousAgent)
	}
	restartsInPlace(containerScope, 2)
	sh("kubectl apply -f examples/policies/max-restarts-policy.yaml")
	research := fw.NewNamespace(ctx, k8sClient)
	Expect(k8sClient.Patch(ctx, research, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team-tier":"research"}}}`)))).To(Succeed())
	expectPolicyEnforced(research.Name)

	By("upgrading to " + releaseVersion + " while they run")
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	out, exit := runScript(GinkgoT().TempDir(), scriptTools(root), strings.ReplaceAll(savePolicy+"\n"+describePolicy, "NAME", "max-restarts"))
	Expect(exit).To(BeZero(), "%s\n%s:\n%s", savePolicy, describePolicy, out)
	Expect(out).To(ContainSubstring(docOutputs[describePolicy][0]), "the tree's inplacectl compiles the installed policy")
	before := map[string]map[string]string{"container": runState(containerScope), "process": runState(processScope)}
	upgraded := time.Now()
	Expect(sh(inRelease(applyCRDs, current))).To(ContainSubstring(docOutputs[applyCRDs][0]))
	sh(inRelease(applyRelease, current))
	expectRelease(releaseVersion, currentManager)
	Expect(sh(getPolicies)).To(MatchRegexp(`max-restarts\s+Deny\s+True`))
	expectPolicyEnforced(research.Name)
	Expect(runState(containerScope)).To(Equal(before["container"]), "the upgrade restarted or recreated nothing")
	Expect(runState(processScope)).To(Equal(before["process"]), "the upgrade restarted or recreated nothing")
	// The new controller restarts the Pods its predecessor started, with
	// their agents of the previous release; the other JobSet, which it
	// reconciled too, is left as it was.
	restartsInPlace(containerScope, 3)
	Expect(runState(processScope)).To(Equal(before["process"]), "a restart of another JobSet moved this one")
	restartsInPlace(processScope, 2)
	expectAgent(containerScope, previousAgent)
	expectAgent(processScope, previousAgent)
	expectNoCRDEventsSince(upgraded)
	// A JobSet admitted by the new release, with its agent, for the
	// rollback.
	admittedNew := util.WorkerJobSet("admitted-new", ns.Name, 2, nil)
	Expect(k8sClient.Create(ctx, admittedNew)).To(Succeed())
	util.ExpectWorkersRunning(ctx, k8sClient, admittedNew, 2, 1, timeout)
	expectAgent(admittedNew, currentAgent)

	By("rolling back to " + previousRelease.version)
	before = map[string]map[string]string{"container": runState(containerScope), "process": runState(processScope), "admitted-new": runState(admittedNew)}
	rolledBack := time.Now()
	Expect(sh(inRelease(applyCRDs, previous))).To(ContainSubstring(docOutputs[applyCRDs][0]))
	sh(inRelease(applyRelease, previous))
	expectRelease(previousRelease.version, previousManager)
	expectPolicyEnforced(research.Name)
	Expect(runState(containerScope)).To(Equal(before["container"]), "the rollback restarted or recreated nothing")
	Expect(runState(processScope)).To(Equal(before["process"]), "the rollback restarted or recreated nothing")
	Expect(runState(admittedNew)).To(Equal(before["admitted-new"]), "the rollback restarted or recreated nothing")
	restartsInPlace(processScope, 3)
	Expect(runState(containerScope)).To(Equal(before["container"]), "a restart of another JobSet moved this one")
	// The previous controller restarts Pods with the new release's agent.
	restartsInPlace(admittedNew, 2)
	expectAgent(admittedNew, currentAgent)
	expectNoCRDEventsSince(rolledBack)

	for _, js := range []*jobset.JobSet{containerScope, processScope, admittedNew} {
		deleteJobSet(js)
	}
	sh(inRelease(deleteRelease, previous))
	expectUninstalled()
}
