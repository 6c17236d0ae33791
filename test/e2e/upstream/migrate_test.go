package upstream

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	inplacectl "github.com/inplace-dev/inplace/cmd/inplacectl/app"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// The migration's commands, as docs/how-to/migrate-from-jobset.md shows them
// for the install under upstream's names.
var migrationSteps = []string{
	"kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0",
	"kubectl -n jobset-system rollout status deployment jobset-controller-manager",
	"kubectl delete mutatingwebhookconfiguration jobset-mutating-webhook-configuration",
	"kubectl delete validatingwebhookconfiguration jobset-validating-webhook-configuration",
	replaceCRD,
	crdOwner,
	"kubectl -n jobset-system delete deployment jobset-controller-manager",
}

const (
	saveJobSets = "kubectl get jobsets -A -o yaml > jobsets-before.yaml"
	replaceCRD  = "kubectl apply --server-side --force-conflicts -f config/crd/bases/jobset.x-k8s.io_jobsets.yaml"
	crdOwner    = `kubectl get crd jobsets.jobset.x-k8s.io -o jsonpath='{.metadata.labels.inplace\.dev/crd-owner}'`
	// getJobSets runs in the JobSets' namespace, team-a on the page.
	getJobSets = "kubectl get jobsets -n team-a"
	migrate    = "inplacectl migrate"
)

// What is left of upstream once inplace runs in its namespace (step 6).
var removeUpstreamLeftovers = []string{
	"kubectl -n jobset-system delete serviceaccount,service,secret,configmap,role,rolebinding -l app.kubernetes.io/name=jobset",
	"kubectl -n jobset-system delete lease 6d4f6a47.jobset.x-k8s.io --ignore-not-found",
	"kubectl delete clusterrole,clusterrolebinding -l app.kubernetes.io/name=jobset",
}

// docOutputs are lines docs/how-to/migrate-from-jobset.md shows a command
// printing: shDoc checks that the command prints them, and migrates that
// the page still shows them. Runs of blanks count as one blank: columns
// are as wide as their widest cell.
var docOutputs = map[string][]string{
	migrationSteps[0]: {"deployment.apps/jobset-controller-manager scaled"},
	migrationSteps[1]: {`deployment "jobset-controller-manager" successfully rolled out`},
	migrationSteps[2]: {`mutatingwebhookconfiguration.admissionregistration.k8s.io "jobset-mutating-webhook-configuration" deleted`},
	migrationSteps[3]: {`validatingwebhookconfiguration.admissionregistration.k8s.io "jobset-validating-webhook-configuration" deleted`},
	replaceCRD:        {"customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io serverside-applied"},
	crdOwner:          {"inplace"},
	migrationSteps[6]: {`deployment.apps "jobset-controller-manager" deleted from jobset-system namespace`},
	dropIn:            {"namespace/jobset-system serverside-applied", "deployment.apps/jobset-controller-manager serverside-applied"},
	rollout:           {`deployment "jobset-controller-manager" successfully rolled out`},
	getJobSets:        {"NAME        TERMINALSTATE   RESTARTS   EPOCH   COMPLETED   AGE"},
	removeUpstreamLeftovers[0]: {
		`serviceaccount "jobset-controller-manager" deleted from jobset-system namespace`,
		`service "jobset-webhook-service" deleted from jobset-system namespace`,
		`secret "jobset-webhook-server-cert" deleted from jobset-system namespace`,
		`configmap "jobset-manager-config" deleted from jobset-system namespace`,
		`role.rbac.authorization.k8s.io "jobset-leader-election-role" deleted from jobset-system namespace`,
		`rolebinding.rbac.authorization.k8s.io "jobset-leader-election-rolebinding" deleted from jobset-system namespace`,
	},
	removeUpstreamLeftovers[1]: {`lease.coordination.k8s.io "6d4f6a47.jobset.x-k8s.io" deleted from jobset-system namespace`},
	removeUpstreamLeftovers[2]: {
		`clusterrole.rbac.authorization.k8s.io "jobset-manager-role" deleted`,
		`clusterrolebinding.rbac.authorization.k8s.io "jobset-manager-rolebinding" deleted`,
	},
}

// migrateBefore and migrateAfter are lines docs/how-to/migrate-from-jobset.md
// shows inplacectl migrate printing before the migration, with upstream
// running its five JobSets and inplace not installed, and at step 5, with
// inplace installed under upstream's names; the JobSets are in team-a.
var (
	migrateBefore = []string{
		"BLOCKS   1. upstream controller stopped  Deployment jobset-system/jobset-controller-manager has 1 replica(s), 1 running: scale it to 0 (kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0); the Jobs and Pods of its JobSets keep running",
		"BLOCKS   1. upstream controller stopped  Lease jobset-system/6d4f6a47.jobset.x-k8s.io is held by jobset-controller-manager-",
		"BLOCKS   2. upstream webhooks removed    mutatingwebhookconfiguration/jobset-mutating-webhook-configuration and validatingwebhookconfiguration/jobset-validating-webhook-configuration remain",
		"BLOCKS   3. JobSet CRD is inplace's      the JobSet CRD jobsets.jobset.x-k8s.io is not inplace's",
		"BLOCKS   4. inplace installed and ready  no Deployment inplace-system/inplace-manager: install inplace",
		"BLOCKS   4. inplace installed and ready  no Deployment inplace-system/inplace-webhook: install inplace",
		"done     5. JobSets                      5 JobSet(s), 4 not finished, keep their UID, spec and status through the CRD's replacement",
		"warning  JobSet team-a/in-place          upstream restarted it in place",
		"6 finding(s) block the migration from upstream JobSet",
	}
	migrateAfter = []string{
		"done  1. upstream controller stopped  no replica of jobset-controller-manager or jobset-controller and no Lease 6d4f6a47.jobset.x-k8s.io or 6d4f6a47.x-k8s.io held in jobset-system",
		"done  2. upstream webhooks removed    no jobset-mutating-webhook-configuration or jobset-validating-webhook-configuration",
		"done  3. JobSet CRD is inplace's      jobsets.jobset.x-k8s.io serves every status field inplace writes",
		"done  4. inplace installed and ready  Deployment jobset-system/jobset-controller-manager: 1 of 1 replica(s) available",
		"done  5. JobSets                      5 JobSet(s), 4 not finished, keep their UID, spec and status through the CRD's replacement",
		"Nothing blocks: inplace runs the JobSets, and upstream JobSet's controller, webhooks and CRD are gone.",
	}
)

// blanks are runs of spaces and tabs.
var blanks = regexp.MustCompile(`[ \t]+`)

// squeeze makes each run of blanks one space.
func squeeze(s string) string { return blanks.ReplaceAllString(s, " ") }

// expectPrints checks that out, with the JobSets' namespace read as the
// page's team-a, holds each line.
func expectPrints(command, out string, lines []string) {
	GinkgoHelper()
	out = squeeze(strings.ReplaceAll(out, managedNamespace+"/", "team-a/"))
	for _, line := range lines {
		Expect(out).To(ContainSubstring(squeeze(line)), "%q prints what docs/how-to/migrate-from-jobset.md shows", command)
	}
}

// shDoc runs a command of docs/how-to/migrate-from-jobset.md, in the
// JobSets' namespace for the page's team-a, and checks that it prints
// what the page shows.
func shDoc(limit time.Duration, command string) {
	GinkgoHelper()
	expectPrints(command, sh(limit, strings.ReplaceAll(command, "team-a", managedNamespace)), docOutputs[command])
}

// inplacectlMigrate runs inplacectl migrate with its defaults, as the page
// does, and checks its exit status and that it prints lines.
func inplacectlMigrate(code int, lines []string) {
	GinkgoHelper()
	var out, errOut strings.Builder
	got := inplacectl.Run(ctx, []string{"migrate", "--kubeconfig", fw.Cluster.Kubeconfig}, &out, &errOut)
	GinkgoWriter.Printf("$ %s\n%s%s", migrate, out.String(), errOut.String())
	Expect(got).To(Equal(code), "%s exits %d:\n%s%s", migrate, code, out.String(), errOut.String())
	expectPrints(migrate, out.String(), lines)
}

// The JobSets upstream's controller manages before the migration, and
// what the migration must keep of them.
var (
	managedNamespace                                    string
	running, restarted, completed, suspended, inPlaceJS *jobset.JobSet
	// beforeJobs and beforePods are the UIDs of every Job and Pod, by
	// namespace/name, under upstream.
	beforeJobs, beforePods map[string]string
)

// sleeper is a JobSet of Debian Pods that run script under bash.
func sleeper(name string, replicas int32, script string) *jobset.JobSet {
	rj := wrappers.MakeReplicatedJob("workers").Replicas(replicas).Obj()
	pod := &rj.Template.Spec.Template.Spec
	pod.TerminationGracePeriodSeconds = ptr.To[int64](0)
	pod.Containers[0].Image = "docker.io/library/debian:12"
	pod.Containers[0].Command = []string{"bash", "-c", script}
	annotation := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.annotations['%s']", key)}}
	}
	pod.Containers[0].Env = []corev1.EnvVar{
		{Name: "JOB_INDEX", ValueFrom: annotation(jobset.JobIndexKey)},
		{Name: "RESTART_ATTEMPT", ValueFrom: annotation(jobset.RestartsKey)},
	}
	return wrappers.MakeJobSet(name, managedNamespace).ReplicatedJob(rj).Obj()
}

// expectReady waits until the JobSet's replicated job reports ready Jobs.
func expectReady(js *jobset.JobSet, ready int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), &got)).To(Succeed())
		g.Expect(got.Status.ReplicatedJobsStatus).To(ContainElement(HaveField("Ready", ready)), "%s", js.Name)
	}).WithTimeout(timeout).Should(Succeed())
}

// uids are the UIDs of the namespace's Jobs and Pods, by name.
func uids() (jobs, pods map[string]string) {
	GinkgoHelper()
	jobs, pods = map[string]string{}, map[string]string{}
	var jl batchv1.JobList
	Expect(k8sClient.List(ctx, &jl, client.InNamespace(managedNamespace))).To(Succeed())
	for _, j := range jl.Items {
		if j.DeletionTimestamp == nil {
			jobs[j.Name] = string(j.UID)
		}
	}
	var pl corev1.PodList
	Expect(k8sClient.List(ctx, &pl, client.InNamespace(managedNamespace))).To(Succeed())
	for _, p := range pl.Items {
		if p.DeletionTimestamp == nil {
			pods[p.Name] = string(p.UID)
		}
	}
	return jobs, pods
}

func sh(limit time.Duration, line string) string {
	GinkgoHelper()
	out, err := run(limit, nil, "sh", "-c", line)
	Expect(err).NotTo(HaveOccurred(), "%s:\n%s", line, out)
	return out
}

// installUpstream installs upstream's controller from its module, as its
// release does, and lets it run five JobSets: running, restarted once,
// completed, suspended, and upstream's in-place restart example with its
// agent, restarted in place once.
func installUpstream() {
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	manifests, err := upstreamjobset.Manifests(ctx, root, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	sh(time.Minute, "kubectl apply --server-side -f "+manifests)
	sh(3*time.Minute, "kubectl -n jobset-system rollout status deployment jobset-controller-manager --timeout=3m")

	// A namespace that outlives this spec: the next one migrates its
	// JobSets (the container's AfterAll deletes it).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "migrate-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	managedNamespace = ns.Name
	grantUpstreamAgent(managedNamespace)
	running = sleeper("running", 2, "sleep 3600")
	// Job 1 fails at the first attempt: upstream recreates every Job.
	restarted = sleeper("restarted", 2, `[[ $JOB_INDEX == 1 && $RESTART_ATTEMPT == 0 ]] && exit 1; sleep 3600`)
	restarted.Spec.FailurePolicy = &jobset.FailurePolicy{MaxRestarts: 3}
	completed = sleeper("completed", 1, "exit 0")
	suspended = sleeper("suspended", 2, "sleep 3600")
	suspended.Spec.Suspend = ptr.To(true)
	inPlaceJS = upstreamExample(upstreamjobset.SidecarExample, managedNamespace)
	inPlaceJS.Name = "in-place"
	for _, js := range []*jobset.JobSet{running, restarted, completed, suspended, inPlaceJS} {
		// Upstream is ready once its certificate is mounted; the CA it
		// writes into its webhook configurations may reach the API
		// server a moment later.
		Eventually(func() error { return k8sClient.Create(ctx, js.DeepCopy()) }).WithTimeout(time.Minute).Should(Succeed(), "upstream's webhooks admit %s", js.Name)
	}
	expectReady(running, 2)
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(restarted), &got)).To(Succeed())
		g.Expect(got.Status.Restarts).To(Equal(int32(1)))
	}).WithTimeout(timeout).Should(Succeed(), "upstream restarted %s", restarted.Name)
	expectReady(restarted, 2)
	util.ExpectJobSetCondition(ctx, k8sClient, completed, jobset.JobSetCompleted, decide.ReasonAllJobsCompleted, timeout)
	util.ExpectJobSetCondition(ctx, k8sClient, suspended, jobset.JobSetSuspended, decide.ReasonSuspended, timeout)
	expectAttempt(inPlaceJS, 0, 0, "worker")
	exitIn(podsOf(inPlaceJS)[0], "worker")
	expectAttempt(inPlaceJS, 1, 1, "worker")
	Expect(util.GetJobSet(ctx, k8sClient, inPlaceJS).Status.PreviousInPlaceRestartAttempt).To(Equal(ptr.To[int32](0)))
	beforeJobs, beforePods = uids()
}

// migrates hands the five JobSets to inplace installed under upstream's
// names, by the commands of docs/how-to/migrate-from-jobset.md, and checks
// that they print what the page shows, that nothing was recreated and that
// inplace runs them on.
func migrates() {
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "migrate-from-jobset.md"))
	Expect(err).NotTo(HaveOccurred())
	page := squeeze(string(doc))
	for _, command := range slices.Concat([]string{saveJobSets, dropIn, rollout, getJobSets, migrate}, migrationSteps, removeUpstreamLeftovers) {
		Expect(page).To(ContainSubstring(command), "docs/how-to/migrate-from-jobset.md shows the command")
		lines := docOutputs[command]
		if command == migrate {
			lines = slices.Concat(migrateBefore, migrateAfter)
		}
		for _, line := range lines {
			Expect(page).To(ContainSubstring(squeeze(line)), "docs/how-to/migrate-from-jobset.md shows what %q prints", command)
		}
	}

	By("inplacectl migrate before the migration: what blocks, and what changes")
	inplacectlMigrate(1, migrateBefore)
	saved := GinkgoT().TempDir()
	sh(time.Minute, "cd "+saved+" && "+saveJobSets)
	copied, err := os.ReadFile(filepath.Join(saved, "jobsets-before.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, js := range []*jobset.JobSet{running, restarted, completed, suspended, inPlaceJS} {
		Expect(string(copied)).To(ContainSubstring("name: "+js.Name+"\n"), "the copy holds every JobSet")
	}
	for _, line := range migrationSteps {
		shDoc(3*time.Minute, line)
	}
	// Upstream's CRD names its webhook for conversions; ours converts
	// nothing (one version), and that webhook is gone.
	var crd apiextensionsv1.CustomResourceDefinition
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "jobsets.jobset.x-k8s.io"}, &crd)).To(Succeed())
	Expect(crd.Spec.Conversion).To(Or(BeNil(), HaveField("Strategy", apiextensionsv1.NoneConverter)), "the CRD still calls upstream's conversion webhook")
	installDropIn()
	By("step 5: inplacectl migrate, with its defaults: nothing blocks")
	inplacectlMigrate(0, migrateAfter)
	shDoc(time.Minute, getJobSets)
	for _, line := range removeUpstreamLeftovers {
		shDoc(time.Minute, line)
	}
	By("inplace's service account holds none of upstream's rights")
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Namespace: namespace, Verb: "get", Resource: "secrets"},
		{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "jobset-validating-webhook-configuration"},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: serviceaccount.MakeUsername(namespace, "inplace-manager"), ResourceAttributes: &attrs,
		}}
		Expect(k8sClient.Create(ctx, review)).To(Succeed())
		Expect(review.Status.Allowed).To(BeFalse(), "inplace-manager may %s %s", attrs.Verb, attrs.Resource)
	}

	By("inplace takes them over: the in-place example restarts in place again, the suspended one resumes")
	// Upstream never writes syncedEpoch: inplace has read the example.
	Eventually(func(g Gomega) {
		var got jobset.JobSet
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inPlaceJS), &got)).To(Succeed())
		g.Expect(got.Status.SyncedEpoch).To(Equal(int32(2)), "attempt 1 is epoch 2")
	}).WithTimeout(timeout).Should(Succeed())
	Expect(util.GetJobSet(ctx, k8sClient, restarted).Status.Restarts).To(Equal(int32(1)))
	util.ExpectJobSetCondition(ctx, k8sClient, completed, jobset.JobSetCompleted, decide.ReasonAllJobsCompleted, timeout)
	util.ExpectJobSetCondition(ctx, k8sClient, suspended, jobset.JobSetSuspended, decide.ReasonSuspended, timeout)
	exitIn(podsOf(inPlaceJS)[1], "worker")
	expectAttempt(inPlaceJS, 2, 2, "worker")
	util.UpdateJobSet(ctx, k8sClient, suspended, func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(false) })
	expectReady(suspended, 2)
	expectReady(running, 2)
	expectReady(restarted, 2)

	By("nothing recreated: the Jobs and Pods upstream made, every one")
	jobs, pods := uids()
	Expect(jobs).To(Equal(beforeJobs), "the suspended JobSet resumes on its own Jobs")
	for name, uid := range beforePods {
		Expect(pods).To(HaveKeyWithValue(name, uid), "Pod %s", name)
	}
	Expect(pods).To(HaveLen(len(beforePods)+2), "only the resumed JobSet's 2 Pods are new")

	// Its Pods would only slow upstream's suite down.
	Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managedNamespace}})).To(Succeed())
}
