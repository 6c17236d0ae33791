package migration

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // upstream's job-key label, not a security boundary
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	inplacectl "github.com/inplace-dev/inplace/cmd/inplacectl/app"
	"github.com/inplace-dev/inplace/cmd/inplacectl/migration"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/controller/coexist"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
	"github.com/inplace-dev/inplace/test/wrappers"
)

const timeout = 20 * time.Second

// The procedure's commands, as docs/how-to/migrate-from-jobset.md shows them; the
// test runs them with bin/kubectl, from the repository's root.
var (
	stopUpstream           = "kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0"
	deleteUpstreamWebhooks = []string{
		"kubectl delete mutatingwebhookconfiguration jobset-mutating-webhook-configuration",
		"kubectl delete validatingwebhookconfiguration jobset-validating-webhook-configuration",
	}
	replaceCRD = "kubectl apply --server-side --force-conflicts -f config/crd/bases/jobset.x-k8s.io_jobsets.yaml"
	// replaceCRDFromRelease runs where the release's jobset-crd.yaml is.
	replaceCRDFromRelease = "kubectl apply --server-side --force-conflicts -f jobset-crd.yaml"
	saveJobSets           = "kubectl get jobsets -A -o yaml > jobsets-before.yaml"
	crdOwner              = `kubectl get crd jobsets.jobset.x-k8s.io -o jsonpath='{.metadata.labels.inplace\.dev/crd-owner}'`
	// getJobSets runs in the namespace of the JobSets (team-a on the page).
	getJobSets = "kubectl get jobsets -n team-a"
	migrate    = "inplacectl migrate"
	// What is left of upstream once inplace runs in its own namespace
	// (step 6).
	deleteUpstreamNamespace   = "kubectl delete namespace jobset-system"
	listUpstreamClusterRBAC   = "kubectl get clusterroles,clusterrolebindings -o name | grep jobset-"
	deleteUpstreamClusterRBAC = "kubectl delete clusterrole,clusterrolebinding -l app.kubernetes.io/name=jobset"
)

// docOutputs are lines docs/how-to/migrate-from-jobset.md shows a command
// printing: the test checks that the command prints them (kubectl), and
// that the page still shows them. Runs of blanks count as one blank: the
// columns are as wide as their widest cell. getJobSets's lines are
// compared without their last column, the age. The commands of
// onlyOutputs print those lines and nothing else.
var docOutputs = map[string][]string{
	stopUpstream:              {"deployment.apps/jobset-controller-manager scaled"},
	deleteUpstreamWebhooks[0]: {`mutatingwebhookconfiguration.admissionregistration.k8s.io "jobset-mutating-webhook-configuration" deleted`},
	deleteUpstreamWebhooks[1]: {`validatingwebhookconfiguration.admissionregistration.k8s.io "jobset-validating-webhook-configuration" deleted`},
	replaceCRD:                {"customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io serverside-applied"},
	replaceCRDFromRelease:     {"customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io serverside-applied"},
	crdOwner:                  {"inplace"},
	getJobSets: {
		"NAME        TERMINALSTATE   RESTARTS   EPOCH   COMPLETED   AGE",
		"completed   Completed       0                  True        8s",
		"in-place                    2          3                   8s",
		"restarted                   2                              8s",
		"running                     0                              9s",
		"suspended                   0                              8s",
	},
	deleteUpstreamNamespace: {`namespace "jobset-system" deleted`},
	// What upstream's kustomize manifests install (v0.12.0's release).
	listUpstreamClusterRBAC: {
		"clusterrole.rbac.authorization.k8s.io/jobset-manager-role",
		"clusterrole.rbac.authorization.k8s.io/jobset-metrics-reader",
		"clusterrole.rbac.authorization.k8s.io/jobset-proxy-role",
		"clusterrolebinding.rbac.authorization.k8s.io/jobset-manager-rolebinding",
		"clusterrolebinding.rbac.authorization.k8s.io/jobset-metrics-reader-rolebinding",
		"clusterrolebinding.rbac.authorization.k8s.io/jobset-proxy-rolebinding",
	},
	deleteUpstreamClusterRBAC: {
		`clusterrole.rbac.authorization.k8s.io "jobset-manager-role" deleted`,
		`clusterrole.rbac.authorization.k8s.io "jobset-metrics-reader" deleted`,
		`clusterrole.rbac.authorization.k8s.io "jobset-proxy-role" deleted`,
		`clusterrolebinding.rbac.authorization.k8s.io "jobset-manager-rolebinding" deleted`,
		`clusterrolebinding.rbac.authorization.k8s.io "jobset-metrics-reader-rolebinding" deleted`,
		`clusterrolebinding.rbac.authorization.k8s.io "jobset-proxy-rolebinding" deleted`,
	},
}

var onlyOutputs = map[string]bool{
	deleteUpstreamNamespace:   true,
	listUpstreamClusterRBAC:   true,
	deleteUpstreamClusterRBAC: true,
}

// migrateBefore and migrateAfter are lines docs/how-to/migrate-from-jobset.md
// shows inplacectl migrate printing before the procedure, with upstream
// running and inplace not installed, and at its end, with inplace's
// Deployments (config/default's, 2 replicas each) available; the JobSets
// are in team-a.
var (
	migrateBefore = []string{
		"BLOCKS   1. upstream controller stopped  Deployment jobset-system/jobset-controller-manager has 1 replica(s), 1 running: scale it to 0 (kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0); the Jobs and Pods of its JobSets keep running",
		"BLOCKS   1. upstream controller stopped  Lease jobset-system/6d4f6a47.jobset.x-k8s.io is held by jobset-controller-manager-",
		"BLOCKS   2. upstream webhooks removed    mutatingwebhookconfiguration/jobset-mutating-webhook-configuration and validatingwebhookconfiguration/jobset-validating-webhook-configuration remain",
		"BLOCKS   3. JobSet CRD is inplace's      the JobSet CRD jobsets.jobset.x-k8s.io is not inplace's",
		"BLOCKS   4. inplace installed and ready  no Deployment inplace-system/inplace-manager: install inplace",
		"BLOCKS   4. inplace installed and ready  no Deployment inplace-system/inplace-webhook: install inplace",
		"done     5. JobSets                      5 JobSet(s), 4 not finished, keep their UID, spec and status through the CRD's replacement",
		"warning  JobSet team-a/in-place          upstream restarted it in place 2 time(s)",
		"6 finding(s) block the migration from upstream JobSet",
	}
	migrateAfter = []string{
		"done  1. upstream controller stopped  no replica of jobset-controller-manager or jobset-controller and no Lease 6d4f6a47.jobset.x-k8s.io or 6d4f6a47.x-k8s.io held in jobset-system",
		"done  2. upstream webhooks removed    no jobset-mutating-webhook-configuration or jobset-validating-webhook-configuration",
		"done  3. JobSet CRD is inplace's      jobsets.jobset.x-k8s.io serves every status field inplace writes",
		"done  4. inplace installed and ready  Deployment inplace-system/inplace-manager: 2 of 2 replica(s) available",
		"done  4. inplace installed and ready  Deployment inplace-system/inplace-webhook: 2 of 2 replica(s) available",
		"done  5. JobSets                      5 JobSet(s), 4 not finished, keep their UID, spec and status through the CRD's replacement",
		"Nothing blocks: inplace runs the JobSets, and upstream JobSet's controller, webhooks and CRD are gone.",
	}
)

// blanks are runs of spaces and tabs.
var blanks = regexp.MustCompile(`[ \t]+`)

// squeeze makes each run of blanks one space.
func squeeze(s string) string { return blanks.ReplaceAllString(s, " ") }

// withoutAge is a line of kubectl get jobsets without its last column.
func withoutAge(line string) string {
	fields := strings.Fields(line)
	return strings.Join(fields[:max(len(fields)-1, 0)], " ")
}

// expectPrints checks that out, with ns read as team-a, holds each line,
// and only those of a command of onlyOutputs.
func expectPrints(command, out, ns string, lines []string) {
	GinkgoHelper()
	out = strings.ReplaceAll(out, ns+"/", "team-a/")
	if onlyOutputs[command] {
		Expect(strings.Split(strings.TrimSuffix(out, "\n"), "\n")).To(Equal(lines), "%q prints what docs/how-to/migrate-from-jobset.md shows, and nothing else", command)
	}
	for _, line := range lines {
		if command == getJobSets {
			var got []string
			for l := range strings.Lines(out) {
				got = append(got, withoutAge(l))
			}
			Expect(got).To(ContainElement(withoutAge(line)), "%q prints what docs/how-to/migrate-from-jobset.md shows:\n%s", command, out)
			continue
		}
		Expect(squeeze(out)).To(ContainSubstring(squeeze(line)), "%q prints what docs/how-to/migrate-from-jobset.md shows", command)
	}
}

// inplacectlMigrate runs inplacectl migrate with its defaults, as the page
// does, and checks its exit status and that it prints lines.
func inplacectlMigrate(kubeconfig, ns string, code int, lines []string) {
	GinkgoHelper()
	var out, errOut strings.Builder
	got := inplacectl.Run(ctx, []string{"migrate", "--kubeconfig", kubeconfig}, &out, &errOut)
	GinkgoWriter.Printf("$ %s\n%s%s", migrate, out.String(), errOut.String())
	Expect(got).To(Equal(code), "%s exits %d:\n%s%s", migrate, code, out.String(), errOut.String())
	expectPrints(migrate, out.String(), ns, lines)
}

var _ = It("shows the commands the migration test runs, and what they print", func() {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "migrate-from-jobset.md"))
	Expect(err).NotTo(HaveOccurred())
	page := squeeze(string(doc))
	for _, cmd := range append([]string{saveJobSets, stopUpstream, replaceCRD, replaceCRDFromRelease, crdOwner, getJobSets, migrate, deleteUpstreamNamespace, listUpstreamClusterRBAC, deleteUpstreamClusterRBAC}, deleteUpstreamWebhooks...) {
		Expect(page).To(ContainSubstring(cmd), "docs/how-to/migrate-from-jobset.md no longer shows a command the migration test runs")
		lines := docOutputs[cmd]
		if cmd == migrate {
			lines = append(slices.Clone(migrateBefore), migrateAfter...)
		}
		for _, line := range lines {
			if cmd == getJobSets {
				// Without the age, which the page shows as one run had it.
				line = strings.Join(strings.Fields(withoutAge(line)), " ")
			}
			Expect(page).To(ContainSubstring(squeeze(line)), "docs/how-to/migrate-from-jobset.md shows what %q prints", cmd)
		}
	}
})

var _ = It("moves JobSets from upstream's CRD to ours with nothing lost", func() {
	ns := fw.NewNamespace(ctx, k8sClient).Name
	for _, name := range []string{coexist.UpstreamNamespace, "inplace-system"} {
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
	}

	By("JobSets, Jobs and Services as upstream's controller left them")
	running := upstreamJobSet(ns, "running", 2, nil)
	running.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "workers", Ready: 2, Active: 2}}
	restarted := upstreamJobSet(ns, "restarted", 2, func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobset.Recreate, Rules: []jobset.FailurePolicyRule{
			{Name: "restartWorker", Action: jobset.RestartJob, TargetReplicatedJobs: []string{"workers"}},
		}}
	})
	restarted.Status = jobset.JobSetStatus{
		Restarts: 2, RestartsCountTowardsMax: 2,
		Conditions:           []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionFalse, Reason: "JobsReady", Message: "all jobs are ready", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}},
		ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Ready: 2, Active: 2, JobRestarts: []int32{0, 1}, JobRestartsCountTowardsMax: []int32{0, 1}}},
	}
	completed := upstreamJobSet(ns, "completed", 1, nil)
	completed.Status = jobset.JobSetStatus{
		TerminalState:        jobset.TerminalStateCompleted,
		Conditions:           []metav1.Condition{{Type: string(jobset.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}},
		ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Succeeded: 1}},
	}
	suspended := upstreamJobSet(ns, "suspended", 2, func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
	suspended.Status = jobset.JobSetStatus{
		Conditions:           []metav1.Condition{{Type: string(jobset.JobSetSuspended), Status: metav1.ConditionTrue, Reason: "SuspendedJobs", Message: "jobset is suspended", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}},
		ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Suspended: 2}},
	}
	// Restarted in place twice by upstream (attempt 2 synced, 1 the last
	// deprecated), its Pods annotated by upstream's agents; maxRestarts 3
	// leaves it one restart.
	inPlace := upstreamJobSet(ns, "in-place", 2, func(js *jobset.JobSet) {
		js.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3, RestartStrategy: jobset.InPlaceRestart}
		js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
		js.Spec.ReplicatedJobs[0].Template.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	})
	inPlace.Status = jobset.JobSetStatus{
		PreviousInPlaceRestartAttempt: ptr.To[int32](1), CurrentInPlaceRestartAttempt: ptr.To[int32](2),
		ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{{Name: "workers", Ready: 2, Active: 2}},
	}
	jobSets := []*jobset.JobSet{running, restarted, completed, suspended, inPlace}
	for _, js := range jobSets {
		status := js.Status
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		js.Status = status
		Expect(k8sClient.Status().Update(ctx, js)).To(Succeed(), "status of %s through the status subresource", js.Name)
		Expect(k8sClient.Create(ctx, headlessService(js))).To(Succeed())
	}
	// Upstream's running Jobs; one made before upstream restarted Jobs
	// alone, without a job-restart-attempt label.
	createJobs(running, "0", func(i int, job *batchv1.Job) {
		if i == 1 {
			delete(job.Labels, jobset.JobRestartAttemptKey)
			delete(job.Annotations, jobset.JobRestartAttemptKey)
		}
	}, runningStatus)
	createJobs(restarted, "2", nil, runningStatus)
	createJobs(completed, "0", nil, completeStatus)
	createJobs(suspended, "0", nil, nil)
	createJobs(inPlace, "0", nil, runningStatus)
	createPods(inPlace, "2")

	By("upstream's controller running: its Deployment, its webhooks, its Lease renewed, the rest of its install")
	upstream := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: coexist.UpstreamNamespace, Name: "jobset-controller-manager"}}
	createDeployment(upstream, 1)
	createUpstreamWebhooks()
	createUpstreamInstall()
	releaseLease := holdUpstreamLease()
	DeferCleanup(releaseLease)
	// With failurePolicy Fail and no webhook Service, every JobSet write is
	// refused: the reason the procedure deletes them.
	err := k8sClient.Patch(ctx, running.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"ml"}}}`)))
	Expect(err).To(MatchError(ContainSubstring("failed calling webhook")), "a JobSet update with upstream's webhooks and no webhook Service")

	before := snapshot(ns)

	By("inplacectl migrate before the procedure: what blocks, and what changes")
	kubeconfig := framework.WriteKubeconfig(cfg)
	inplacectlMigrate(kubeconfig, ns, 1, migrateBefore)
	saved := GinkgoT().TempDir()
	kubectl(kubeconfig, saved, ns, saveJobSets)
	copied, err := os.ReadFile(filepath.Join(saved, "jobsets-before.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, js := range jobSets {
		Expect(string(copied)).To(ContainSubstring("name: "+js.Name+"\n"), "the copy holds every JobSet")
	}

	By("inplace installed while upstream runs: it holds back")
	// The manager runs in this process; its Deployments stand for it in
	// inplace-system, available, as the check reads them, with the
	// replicas of config/default.
	for _, name := range migration.ManagerDeployments {
		createDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "inplace-system", Name: name}}, 2)
	}
	probe := startManager()
	for _, js := range jobSets {
		expectEvent(ns, js.Name, coexist.ReasonUpstreamRunning)
	}
	expectEvent(metav1.NamespaceDefault, coexist.CRDName, coexist.ReasonUpstreamRunning)
	Eventually(probe).WithTimeout(timeout).Should(And(HavePrefix("500"), ContainSubstring("[-]upstream-jobset failed")))
	Expect(framework.MetricValue(fw.Metrics(), "inplace_upstream_jobset_controller_detected")).To(Equal(1.0))
	Consistently(func(g Gomega) {
		g.Expect(snapshot(ns).versions).To(Equal(before.versions), "resourceVersions of the JobSets, Jobs and Services")
		for _, w := range fw.ManagerWrites() {
			g.Expect(w).To(ContainSubstring("/events"), "the manager wrote something else than an Event")
		}
	}).WithTimeout(2 * time.Second).Should(Succeed())

	By("inplacectl migrate lists what blocks, and what changes")
	Expect(check()).To(ContainElement(And(
		HaveField("Severity", migration.Warning), HaveField("Step", "JobSet "+ns+"/"+inPlace.Name),
		HaveField("Message", ContainSubstring("upstream restarted it in place 2 time(s)")),
		HaveField("Message", ContainSubstring("status.restarts 0 -> 2, inPlaceRestarts 2, restartsCountTowardsMax 0 -> 2")),
	)))
	Expect(blocking(check())).To(ConsistOf(
		HavePrefix(migration.StepUpstreamController+": Deployment jobset-system/jobset-controller-manager has 1 replica(s)"),
		HavePrefix(migration.StepUpstreamController+": Lease jobset-system/6d4f6a47.jobset.x-k8s.io is held by jobset-controller-manager-"),
		HavePrefix(migration.StepUpstreamWebhooks+": mutatingwebhookconfiguration/jobset-mutating-webhook-configuration and validatingwebhookconfiguration/jobset-validating-webhook-configuration remain"),
		HavePrefix(migration.StepCRD+": the JobSet CRD jobsets.jobset.x-k8s.io is not inplace's"),
	))

	By("the procedure of docs/how-to/migrate-from-jobset.md")
	kubectl(kubeconfig, root, ns, stopUpstream)
	// The Deployment controller's part (none runs here): its Pod gone, the
	// controller stopped. Its Lease stays held until it lapses, 15 s after
	// its last renewal: the test keeps it held through the CRD's
	// replacement, so that what the replacement alone did to the JobSets
	// is seen while inplace still holds back, and then releases it, as its
	// lapse would (released or lapsed, coexist.InspectLease reads it as not
	// held).
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(upstream), upstream)).To(Succeed())
	Expect(upstream.Spec.Replicas).To(HaveValue(BeZero()))
	upstream.Status = appsv1.DeploymentStatus{}
	Expect(k8sClient.Status().Update(ctx, upstream)).To(Succeed())
	for _, cmd := range deleteUpstreamWebhooks {
		kubectl(kubeconfig, root, ns, cmd)
	}
	// What the gate asks before it resumes on a replaced CRD: upstream's
	// schema drops the counters only inplace writes from a status write.
	Expect(probeServed()).To(ConsistOf(
		"status.inPlaceRestarts", "status.deprecatedEpoch", "status.syncedEpoch", "status.syncedPods"))
	kubectl(kubeconfig, root, ns, replaceCRD)
	// The same CRD as the release ships it, alone, with its header.
	release := GinkgoT().TempDir()
	crd, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(release, "jobset-crd.yaml"), append([]byte("# The JobSet CRD of inplace, alone.\n"), crd...), 0o600)).To(Succeed())
	kubectl(kubeconfig, release, ns, replaceCRDFromRelease)
	kubectl(kubeconfig, root, ns, crdOwner)

	By("every JobSet kept its UID, spec and status; every Job and Service its UID")
	after := snapshot(ns)
	for _, js := range jobSets {
		b, a := before.jobSets[js.Name], after.jobSets[js.Name]
		Expect(a.UID).To(Equal(b.UID), "JobSet %s", js.Name)
		Expect(equality.Semantic.DeepEqual(a.Spec, b.Spec)).To(BeTrue(), "JobSet %s: spec changed", js.Name)
		Expect(equality.Semantic.DeepEqual(a.Status, b.Status)).To(BeTrue(), "JobSet %s: status changed from\n%+v\nto\n%+v", js.Name, b.Status, a.Status)
	}
	Expect(after.uids).To(Equal(before.uids))
	// Taken while upstream's Lease held inplace back: the CRD's
	// replacement alone, nothing written by inplace.
	Expect(probe()).To(ContainSubstring("[-]upstream-jobset failed"))
	for _, w := range fw.ManagerWrites() {
		Expect(w).To(ContainSubstring("/events"), "the manager wrote something else than an Event while upstream's Lease was held")
	}
	releaseLease()

	By("inplace resumes: it reconciles them, adopting their Jobs")
	expectEvent(metav1.NamespaceDefault, coexist.CRDName, coexist.ReasonResumed)
	// Resumed once the API server served our schema, not before: no
	// status it writes from now on loses a field.
	Expect(probeServed()).To(BeEmpty())
	Eventually(probe).WithTimeout(timeout).Should(HavePrefix("200"))
	Expect(framework.MetricValue(fw.Metrics(), "inplace_jobset_controller_held")).To(Equal(0.0))
	// The JobSet upstream restarted in place goes on from its attempts,
	// its two in-place restarts counted, its Pods' attempts read as the
	// synced epoch: none reads as invalid.
	expectEvent(ns, inPlace.Name, "UpstreamInPlaceRestartsCarriedOver")
	Eventually(func(g Gomega) {
		var js jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inPlace), &js)).To(Succeed())
		g.Expect(js.Status).To(And(
			HaveField("SyncedEpoch", int32(3)), HaveField("DeprecatedEpoch", int32(2)),
			HaveField("CurrentInPlaceRestartAttempt", HaveValue(Equal(int32(2)))), HaveField("PreviousInPlaceRestartAttempt", HaveValue(Equal(int32(1)))),
			HaveField("Restarts", int32(2)), HaveField("InPlaceRestarts", int32(2)), HaveField("RestartsCountTowardsMax", int32(2)),
		))
	}).WithTimeout(timeout).Should(Succeed())

	By("step 5 of the procedure: inplacectl migrate, and the JobSets")
	inplacectlMigrate(kubeconfig, ns, 0, migrateAfter)
	kubectl(kubeconfig, root, ns, getJobSets)

	// A failure now is inplace's to handle: the running JobSet has no
	// failure policy, so its first failed Job fails it.
	failJob(ns, running.Name+"-workers-0")
	Eventually(func(g Gomega) {
		var js jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(running), &js)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetFailed))).To(BeTrue(), "conditions %v", js.Status.Conditions)
		g.Expect(js.Status.TerminalState).To(Equal(jobset.TerminalStateFailed))
	}).WithTimeout(timeout).Should(Succeed())
	// A worker exits: inplace restarts the group in place, the third
	// restart towards maxRestarts, the Pods of upstream's agents deprecated
	// by attempt.
	exitWorker(ns, inPlace.Name+"-workers-1-0")
	Eventually(func(g Gomega) {
		var js jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inPlace), &js)).To(Succeed())
		g.Expect(js.Status).To(And(
			HaveField("DeprecatedEpoch", int32(3)), HaveField("PreviousInPlaceRestartAttempt", HaveValue(Equal(int32(2)))),
			HaveField("Restarts", int32(3)), HaveField("InPlaceRestarts", int32(3)), HaveField("RestartsCountTowardsMax", int32(3)),
		))
		g.Expect(meta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetRestarting))).To(BeTrue(), "conditions %v", js.Status.Conditions)
	}).WithTimeout(timeout).Should(Succeed())
	var events corev1.EventList
	Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	Expect(events.Items).NotTo(ContainElement(HaveField("Reason", "InvalidEpoch")))

	now := snapshot(ns)
	for _, js := range jobSets {
		Expect(now.jobSets[js.Name].UID).To(Equal(before.jobSets[js.Name].UID))
		if js != running && js != inPlace {
			Expect(equality.Semantic.DeepEqual(now.jobSets[js.Name].Status, before.jobSets[js.Name].Status)).To(BeTrue(),
				"JobSet %s: status changed under inplace from\n%+v\nto\n%+v", js.Name, before.jobSets[js.Name].Status, now.jobSets[js.Name].Status)
		}
	}
	Expect(now.uids).To(Equal(before.uids), "Jobs, Pods and Services, adopted: none recreated")
	// Nothing created; nothing deleted but the active Job of the JobSet
	// that failed, as upstream deletes it too.
	for _, w := range fw.ManagerWrites() {
		Expect(w).NotTo(Or(HavePrefix("POST /apis/batch/"), HavePrefix("POST /api/v1/namespaces/"+ns+"/services")), "inplace recreated a child")
		if strings.HasPrefix(w, "DELETE ") {
			Expect(w).To(Equal("DELETE /apis/batch/v1/namespaces/"+ns+"/jobs/"+running.Name+"-workers-1"), "inplace deleted a child")
		}
	}

	By("inplacectl migrate: nothing blocks")
	Expect(blocking(check())).To(BeEmpty())

	By("step 6 with inplace in its own namespace: upstream's namespace and cluster-scoped RBAC deleted")
	kubectlWhile(kubeconfig, root, ns, deleteUpstreamNamespace, func() { finalizeNamespace(coexist.UpstreamNamespace) })
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: coexist.UpstreamNamespace}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
	kubectl(kubeconfig, root, ns, listUpstreamClusterRBAC)
	kubectl(kubeconfig, root, ns, deleteUpstreamClusterRBAC)
	var roles rbacv1.ClusterRoleList
	Expect(k8sClient.List(ctx, &roles)).To(Succeed())
	Expect(roles.Items).NotTo(ContainElement(HaveField("Name", ContainSubstring("jobset-"))), "upstream's ClusterRoles are gone")
	var bindings rbacv1.ClusterRoleBindingList
	Expect(k8sClient.List(ctx, &bindings)).To(Succeed())
	Expect(bindings.Items).NotTo(ContainElement(HaveField("Name", ContainSubstring("jobset-"))), "upstream's ClusterRoleBindings are gone")
	// Nothing of upstream is left, and inplace runs on without it. Step 5's
	// lines but the JobSets', which the spec changed since.
	inplacectlMigrate(kubeconfig, ns, 0, slices.Concat(migrateAfter[:5], migrateAfter[6:]))
	Consistently(probe).WithTimeout(2 * time.Second).Should(HavePrefix("200"))
})

// probeServed is what the upstream gate's probe finds the API server drops
// from a JobSet's status written in a dry run.
func probeServed() []string {
	GinkgoHelper()
	dropped, probed, err := controller.ProbeServedSchema(ctx, k8sClient, k8sClient.Status())
	Expect(err).NotTo(HaveOccurred())
	Expect(probed).To(BeTrue(), "no JobSet to write through")
	return dropped
}

// upstreamJobSet is a JobSet of one replicated job of replicas Jobs of two
// Pods, as upstream's webhook defaults it.
func upstreamJobSet(ns, name string, replicas int32, mutate func(*jobset.JobSet)) *jobset.JobSet {
	rj := wrappers.MakeReplicatedJob("workers").Replicas(replicas).Parallelism(2).Obj()
	rj.GroupName = "default"
	rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	js := wrappers.MakeJobSet(name, ns).ReplicatedJob(rj).Obj()
	js.Spec.Network = &jobset.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)}
	js.Spec.SuccessPolicy = &jobset.SuccessPolicy{Operator: jobset.OperatorAll}
	js.Spec.StartupPolicy = &jobset.StartupPolicy{StartupPolicyOrder: jobset.AnyOrder}
	if mutate != nil {
		mutate(js)
	}
	return js
}

// createJobs creates the Jobs of js's current attempt as upstream's
// controller makes them (names, labels and annotations, the controller
// owner reference) and gives them a status.
func createJobs(js *jobset.JobSet, attempt string, mutate func(int, *batchv1.Job), status func(*batchv1.Job)) {
	GinkgoHelper()
	rj := js.Spec.ReplicatedJobs[0]
	for i := range int(rj.Replicas) {
		name := fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, i)
		jobRestarts := "0"
		for _, s := range js.Status.ReplicatedJobsStatus {
			if i < len(s.JobRestarts) {
				jobRestarts = strconv.Itoa(int(s.JobRestarts[i]))
			}
		}
		sum := sha1.Sum([]byte(js.Namespace + "/" + name)) //nolint:gosec // as upstream computes it
		meta := map[string]string{
			jobset.JobSetNameKey:            js.Name,
			jobset.JobSetUIDKey:             string(js.UID),
			jobset.ReplicatedJobNameKey:     rj.Name,
			jobset.ReplicatedJobReplicasKey: strconv.Itoa(int(rj.Replicas)),
			jobset.GlobalReplicasKey:        strconv.Itoa(int(rj.Replicas)),
			jobset.JobIndexKey:              strconv.Itoa(i),
			jobset.JobGlobalIndexKey:        strconv.Itoa(i),
			jobset.JobKey:                   hex.EncodeToString(sum[:]),
			jobset.RestartsKey:              attempt,
			jobset.JobRestartAttemptKey:     jobRestarts,
			jobset.GroupNameKey:             rj.GroupName,
			jobset.GroupReplicasKey:         strconv.Itoa(int(rj.Replicas)),
			jobset.JobGroupIndexKey:         strconv.Itoa(i),
		}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: js.Namespace, Labels: maps.Clone(meta), Annotations: maps.Clone(meta),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))},
			},
			Spec: *rj.Template.Spec.DeepCopy(),
		}
		job.Spec.Template.Labels, job.Spec.Template.Annotations = maps.Clone(meta), maps.Clone(meta)
		job.Spec.Template.Spec.Subdomain = js.Name
		job.Spec.Suspend = ptr.To(ptr.Deref(js.Spec.Suspend, false))
		if mutate != nil {
			mutate(i, job)
		}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		if status != nil {
			status(job)
			Expect(k8sClient.Status().Update(ctx, job)).To(Succeed(), "status of Job %s", job.Name)
		}
	}
}

// createPods creates the Pods of js's Jobs, running and ready, as the Job
// controller and the kubelet leave them (none runs here), each annotated
// with attempt by upstream's agent. The agent itself is left out: the
// controller reads only the annotation and the containers' states.
func createPods(js *jobset.JobSet, attempt string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: "default"}}))).To(Succeed())
	var jobs batchv1.JobList
	Expect(k8sClient.List(ctx, &jobs, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	for _, job := range jobs.Items {
		for i := range int(ptr.Deref(job.Spec.Parallelism, 1)) {
			labels := maps.Clone(job.Spec.Template.Labels)
			labels[batchv1.JobNameLabel], labels[batchv1.ControllerUidLabel] = job.Name, string(job.UID)
			labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(i)
			annotations := maps.Clone(job.Spec.Template.Annotations)
			annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(i)
			annotations[jobset.InPlaceRestartAttemptKey] = attempt
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-%d", job.Name, i), Namespace: js.Namespace, Labels: labels, Annotations: annotations,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&job, batchv1.SchemeGroupVersion.WithKind("Job"))},
				},
				Spec: *job.Spec.Template.Spec.DeepCopy(),
			}
			pod.Spec.AutomountServiceAccountToken = ptr.To(false)
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			start := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
			pod.Status = corev1.PodStatus{
				Phase:      corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}},
			}
			for _, c := range pod.Spec.Containers {
				pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
					Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
				})
			}
			Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed(), "status of Pod %s", pod.Name)
		}
	}
}

// exitWorker ends a Pod's worker container with exit code 1, as the
// kubelet reports it.
func exitWorker(ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		var pod corev1.Pod
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		for i := range pod.Status.ContainerStatuses {
			s := &pod.Status.ContainerStatuses[i]
			s.Ready, s.Started = false, ptr.To(false)
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.Now()}}
		}
		return k8sClient.Status().Update(ctx, &pod)
	}).WithTimeout(timeout).Should(Succeed())
}

func runningStatus(job *batchv1.Job) {
	job.Status.StartTime = ptr.To(metav1.NewTime(time.Now().Add(-time.Hour)))
	job.Status.Active, job.Status.Ready = 2, ptr.To[int32](2)
}

func completeStatus(job *batchv1.Job) {
	start := metav1.NewTime(time.Now().Add(-time.Hour))
	job.Status.StartTime, job.Status.CompletionTime = &start, ptr.To(metav1.Now())
	job.Status.Succeeded, job.Status.Ready = 2, ptr.To[int32](0)
	job.Status.CompletedIndexes = "0,1"
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached},
	}
}

// failJob fails a running Job as the Job controller does.
func failJob(ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		var job batchv1.Job
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		job.Status.Active, job.Status.Ready, job.Status.Failed = 0, ptr.To[int32](0), 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"},
		}
		return k8sClient.Status().Update(ctx, &job)
	}).WithTimeout(timeout).Should(Succeed())
}

// headlessService is the Service upstream makes for a JobSet's Pod DNS names.
func headlessService(js *jobset.JobSet) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: js.Name, Namespace: js.Namespace,
			Labels:          map[string]string{jobset.JobSetNameKey: js.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{jobset.JobSetNameKey: js.Name},
			PublishNotReadyAddresses: true,
		},
	}
}

// createDeployment creates a Deployment of one container and writes the
// status its Deployment controller would (none runs here).
func createDeployment(d *appsv1.Deployment, replicas int32) {
	GinkgoHelper()
	labels := map[string]string{"app": d.Name}
	d.Spec = appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example/" + d.Name + ":1"}}},
		},
	}
	Expect(k8sClient.Create(ctx, d)).To(Succeed())
	d.Status = appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, UpdatedReplicas: replicas}
	Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
}

// createUpstreamWebhooks creates upstream's webhook configurations as its
// manifests do: failurePolicy Fail, its Service in jobset-system.
func createUpstreamWebhooks() {
	GinkgoHelper()
	service := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: coexist.UpstreamNamespace, Name: "jobset-webhook-service", Path: ptr.To(path)}}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{jobset.GroupVersion.Group}, APIVersions: []string{jobset.GroupVersion.Version}, Resources: []string{"jobsets"}},
	}}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	fail := ptr.To(admissionregistrationv1.Fail)
	Expect(k8sClient.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: coexist.UpstreamMutatingWebhook},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate-jobset-x-k8s-io-v1alpha2-jobset.x-k8s.io", ClientConfig: service("/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
			Rules: rules, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"},
		}},
	})).To(Succeed())
	Expect(k8sClient.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: coexist.UpstreamValidatingWebhook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate-jobset-x-k8s-io-v1alpha2-jobset.x-k8s.io", ClientConfig: service("/validate-jobset-x-k8s-io-v1alpha2-jobset"),
			Rules: rules, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"},
		}},
	})).To(Succeed())
}

// holdUpstreamLease plays upstream's leader as controller-runtime's leader
// election does by default: it takes the Lease for 15 s and renews it
// every 2 s until the returned function is called, which stops the
// renewals and releases the Lease (holder empty, as a controller that
// releases on cancel leaves it). Calling it again does nothing.
func holdUpstreamLease() (release func()) {
	GinkgoHelper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: coexist.UpstreamNamespace, Name: coexist.UpstreamLeaseNames[0]},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("jobset-controller-manager-7d9f5c6b8-x2x4q_6f1c2a7e-0d4b-4c5e-9a8e-1f2b3c4d5e6f"),
			LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime:          ptr.To(metav1.NewMicroTime(time.Now())),
			RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
	Expect(k8sClient.Create(ctx, lease)).To(Succeed())
	renewCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		ticker := time.NewTicker(2 * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-ticker.C:
			}
			l := lease.DeepCopy()
			if err := k8sClient.Get(renewCtx, client.ObjectKeyFromObject(l), l); err != nil {
				continue
			}
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			_ = k8sClient.Update(renewCtx, l) // a conflict is retried at the next tick
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			GinkgoHelper()
			cancel()
			<-done
			Eventually(func() error {
				l := lease.DeepCopy()
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
					return err
				}
				now := metav1.NewMicroTime(time.Now())
				l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To(""), ptr.To[int32](1)
				l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
				return k8sClient.Update(ctx, l)
			}).WithTimeout(timeout).Should(Succeed(), "releasing upstream's Lease")
		})
	}
}

// startManager starts inplace's manager as installed, checking upstream's
// presence every 200 ms, and returns a probe of its /readyz: the status
// code and the body.
func startManager() func() string {
	GinkgoHelper()
	ports, err := cluster.FreePorts(1)
	Expect(err).NotTo(HaveOccurred())
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	fw.Configure = func(c *configv1alpha1.Configuration) {
		c.Health.ProbeBindAddress = addr
		c.Controller.UpstreamJobSet.CheckInterval = &metav1.Duration{Duration: 200 * time.Millisecond}
	}
	fw.StartManager(cfg)
	DeferCleanup(fw.StopManager)
	return func() string {
		resp, err := http.Get("http://" + addr + "/readyz?verbose")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
}

// state is what the migration must keep: the JobSets as stored, and the
// UIDs and resourceVersions of them and their Jobs, Pods and Services.
type state struct {
	jobSets  map[string]*jobset.JobSet
	uids     map[string]types.UID
	versions map[string]string
}

func snapshot(ns string) state {
	GinkgoHelper()
	s := state{jobSets: map[string]*jobset.JobSet{}, uids: map[string]types.UID{}, versions: map[string]string{}}
	var jss jobset.JobSetList
	Expect(k8sClient.List(ctx, &jss, client.InNamespace(ns))).To(Succeed())
	for i := range jss.Items {
		js := &jss.Items[i]
		s.jobSets[js.Name] = js
		s.versions["jobset/"+js.Name] = js.ResourceVersion
	}
	var jobs batchv1.JobList
	Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	for _, j := range jobs.Items {
		s.uids["job/"+j.Name], s.versions["job/"+j.Name] = j.UID, j.ResourceVersion
	}
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		s.uids["pod/"+p.Name], s.versions["pod/"+p.Name] = p.UID, p.ResourceVersion
	}
	var svcs corev1.ServiceList
	Expect(k8sClient.List(ctx, &svcs, client.InNamespace(ns))).To(Succeed())
	for _, svc := range svcs.Items {
		s.uids["service/"+svc.Name], s.versions["service/"+svc.Name] = svc.UID, svc.ResourceVersion
	}
	return s
}

// expectEvent waits for an Event of reason about the named object.
func expectEvent(ns, name, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", name), HaveField("Reason", reason))))
	}).WithTimeout(timeout).Should(Succeed(), "Event %s on %s/%s", reason, ns, name)
}

// check runs inplacectl migrate's check.
func check() []migration.Finding {
	GinkgoHelper()
	in, err := migration.Gather(ctx, k8sClient, migration.Options{})
	Expect(err).NotTo(HaveOccurred())
	return migration.Check(in)
}

// blocking lists the blocking findings as "step: message".
func blocking(fs []migration.Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Severity == migration.Blocking {
			out = append(out, f.Step+": "+f.Message)
		}
	}
	return out
}

// kubectl runs one of the procedure's commands as a shell would, with
// bin/kubectl on the test's API server, from dir, with the JobSets'
// namespace ns for the page's team-a, and checks that it prints what the
// page shows.
func kubectl(kubeconfig, dir, ns, command string) {
	GinkgoHelper()
	kubectlWhile(kubeconfig, dir, ns, command, nil)
}

// kubectlWhile is kubectl, with play, if not nil, run while the command
// runs: what a controller that does not run here does for the command to
// end.
func kubectlWhile(kubeconfig, dir, ns, command string, play func()) {
	GinkgoHelper()
	Expect(command).To(HavePrefix("kubectl "))
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	cmdCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // ends the command if play fails
	cmd := exec.CommandContext(cmdCtx, "sh", "-c", strings.ReplaceAll(command, "team-a", ns))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+GinkgoT().TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	Expect(cmd.Start()).To(Succeed(), command)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if play != nil {
		play()
	}
	err = <-done
	Expect(err).NotTo(HaveOccurred(), "%s:\n%s", command, out.String())
	GinkgoWriter.Printf("$ %s\n%s\n", command, out.String())
	expectPrints(command, out.String(), ns, docOutputs[command])
}

// finalizeNamespace plays the namespace controller (none runs here) on a
// namespace being deleted: it deletes every object of the namespace, of
// every kind the API server serves, and then the namespace's finalizer,
// upon which the API server removes the namespace.
func finalizeNamespace(name string) {
	GinkgoHelper()
	var namespace corev1.Namespace
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &namespace)).To(Succeed())
		g.Expect(namespace.DeletionTimestamp).NotTo(BeNil())
	}).WithTimeout(timeout).Should(Succeed(), "namespace %s being deleted", name)
	resources, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerPreferredNamespacedResources()
	Expect(err).NotTo(HaveOccurred())
	objects := dynamic.NewForConfigOrDie(cfg)
	for _, list := range resources {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			in := objects.Resource(gv.WithResource(r.Name)).Namespace(name)
			items, err := in.List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred(), "%s in %s", r.Name, name)
			for _, item := range items.Items {
				Expect(client.IgnoreNotFound(in.Delete(ctx, item.GetName(), metav1.DeleteOptions{}))).To(Succeed(), "%s %s/%s", r.Name, name, item.GetName())
			}
		}
	}
	namespace.Spec.Finalizers = nil
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Finalize(ctx, &namespace, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred(), "finalizing namespace %s", name)
}

// createUpstreamInstall creates what upstream's release manifests
// install besides its CRD, its namespace, its Deployment and its webhook
// configurations, which the spec has made: its ServiceAccount, Roles,
// ClusterRoles and their bindings, its ConfigMap, Secret and Services.
// They are upstream's own, rendered from the module hack/upstream-jobset
// pins (upstreamjobset.Manifests).
func createUpstreamInstall() {
	GinkgoHelper()
	path, err := upstreamjobset.Manifests(ctx, root, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred(), "upstream's release manifests")
	manifests, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer manifests.Close()
	made := []string{"CustomResourceDefinition", "Namespace", "Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
	decoder := utilyaml.NewYAMLOrJSONDecoder(manifests, 4096)
	var kinds []string
	for {
		var u unstructured.Unstructured
		err := decoder.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred(), "upstream's release manifests")
		if len(u.Object) == 0 || slices.Contains(made, u.GetKind()) {
			continue
		}
		Expect(k8sClient.Create(ctx, &u)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
		kinds = append(kinds, u.GetKind())
	}
	Expect(kinds).To(ContainElements("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Secret", "Service"))
}
