package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/api/protocol"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/controller/decide"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var (
	controllerUser = serviceaccount.MakeUsername(deploy.ManagerNamespace, deploy.ManagerServiceAccount)
	webhookUser    = serviceaccount.MakeUsername(deploy.ManagerNamespace, deploy.WebhookServiceAccount)
)

// impliedRights are granted for a check the apiserver makes on another
// call, or for a call only some apiservers or a stale cache bring; each
// says why, since no call of the e2e suite shows it.
var impliedRights = map[util.Right]string{
	{APIGroup: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "bind", Name: "inplace-agent-pods"}: "checked on the agents' RoleBindings the controller creates, which bind that ClusterRole",
	{APIGroup: "jobset.x-k8s.io", Resource: "jobsets/finalizers", Verb: "update"}:                               "checked by OwnerReferencesPermissionEnforcement (on here) when a child is created with blockOwnerDeletion",
	{APIGroup: "", Resource: "namespaces", Verb: "get"}:                                                         "the webhook reads a namespace its cache has not seen yet past the cache",
	{APIGroup: "batch", Resource: "jobs/status", Verb: "patch"}:                                                 "a Job resumed before the Job controller cleared its start time on suspension (test/integration/controller, where no Job controller runs)",
}

// listedByWatch says a list right goes with a watch the managers use: an
// informer lists before it watches, unless the apiserver streams the list
// in its watch (WatchList, as here).
func listedByWatch(r util.Right, calls []util.Call) bool {
	if r.Verb != "list" {
		return false
	}
	w := r
	w.Verb = "watch"
	return slices.ContainsFunc(calls, w.Uses)
}

// rulesOf reads the rules of the Roles in files of config/.
func rulesOf(files ...string) []rbacv1.PolicyRule {
	GinkgoHelper()
	objs, err := deploy.Objects(files...)
	Expect(err).NotTo(HaveOccurred())
	var rules []rbacv1.PolicyRule
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)).To(Succeed())
			rules = append(rules, r.Rules...)
		case "Role":
			var r rbacv1.Role
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)).To(Succeed())
			rules = append(rules, r.Rules...)
		}
	}
	Expect(rules).NotTo(BeEmpty(), "no rules in %v", files)
	return rules
}

// scrapeMetrics reads a manager's metrics as Prometheus would, with the
// token of a service account bound to inplace-metrics-reader.
func scrapeMetrics(url, token string) (int, string) {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	// The metrics server's certificate is its own, self-signed.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local test server
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

var _ = Describe("the managers' RBAC", Serial, func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	// Each step below brings calls that only some of a JobSet's lives
	// make: together, they use every right of the managers' and the
	// agents' Roles. AfterSuite checks that no call of the managers, in any
	// spec, was refused.
	It("grants the calls the managers make, and nothing they do not make", func() {
		cs := kubernetes.NewForConfigOrDie(cfg)

		By("scraping both managers' metrics: they authenticate and authorize the scraper")
		Expect(deploy.Apply(ctx, k8sClient, "config/rbac/metrics_reader_role.yaml")).To(Succeed())
		scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns.Name}}
		Expect(k8sClient.Create(ctx, scraper)).To(Succeed())
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "inplace-e2e-scraper-" + ns.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "inplace-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper.Name, Namespace: ns.Name}},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed()) })
		tr, err := cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, scraper.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		unbound, err := cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, role := range []string{managerapp.RoleController, managerapp.RoleWebhook} {
			Eventually(func(g Gomega) {
				code, body := scrapeMetrics(fw.MetricsURL(role), tr.Status.Token)
				g.Expect(code).To(Equal(http.StatusOK), "the %s manager's metrics: %s", role, body)
			}).WithTimeout(timeout).Should(Succeed())
			code, _ := scrapeMetrics(fw.MetricsURL(role), unbound.Status.Token)
			Expect(code).To(Equal(http.StatusForbidden), "the %s manager's metrics to a service account not bound to inplace-metrics-reader", role)
			// Which build runs, beside the metrics: to any identity the
			// apiserver authenticates, as its own /version
			// (system:public-info-viewer), and to nobody else.
			versionURL := strings.TrimSuffix(fw.MetricsURL(role), "/metrics") + "/version"
			code, body := scrapeMetrics(versionURL, unbound.Status.Token)
			Expect(code).To(Equal(http.StatusOK), "the %s manager's /version: %s", role, body)
			Expect(body).To(ContainSubstring(`"version":"v`))
			code, _ = scrapeMetrics(versionURL, "not-a-token")
			Expect(code).NotTo(Equal(http.StatusOK), "the %s manager's /version without a valid token", role)
		}

		By("a DryRun policy: its status, its findings, its Events")
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-rbac-" + ns.Name},
			Spec: policyv1alpha1.JobSetPolicySpec{
				EnforcementAction: policyv1alpha1.DryRun,
				Match: &policyv1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: ns.Name},
				}},
				Rego: `package e2e.rbac

deny contains "e2e: every JobSet is reported" if input.object.kind == "JobSet"

deny contains "e2e: twice" if input.object.kind == "JobSet"
`,
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		policy = util.ExpectPolicyReady(ctx, k8sClient, policy, metav1.ConditionTrue, timeout)
		reported := wrappers.MakeJobSet("reported", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Suspend(true).Obj()
		Expect(k8sClient.Create(ctx, reported)).To(Succeed())
		// The create's Event first: the recorder patches a series into an
		// Event it has written, and an occurrence that comes while the
		// first is still being written starts a series of its own.
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "PolicyViolationDryRun"), HaveField("Regarding.Name", reported.Name))))
		}).WithTimeout(timeout).Should(Succeed())
		// The same version admitted twice more (no-op updates): its Event
		// is counted again, as a series. The controller's status writes
		// change the version: read it again until two updates land on one.
		Eventually(func(g Gomega) {
			var current jobset.JobSet
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(reported), &current)).To(Succeed())
			for range 2 {
				g.Expect(k8sClient.Update(ctx, current.DeepCopy())).To(Succeed())
			}
			var events eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Reason == "PolicyViolationDryRun" && e.Regarding.Name == reported.Name && e.Series != nil {
					notes = append(notes, e.Note)
				}
			}
			// Two occurrences close together may each start a series (the
			// recorder patches a series it has not finished writing):
			// what matters is that every series carries the policy's
			// whole note.
			g.Expect(notes).To(And(Not(BeEmpty()), HaveEach(policy.Name+": e2e: every JobSet is reported; e2e: twice")))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			g.Expect(policy.Status.Audit).NotTo(BeNil())
			g.Expect(policy.Status.Audit.TotalViolations).NotTo(BeZero())
		}).WithTimeout(timeout).Should(Succeed())
		// The audit's PolicyReport of the namespace: created with the
		// JobSet's results, updated as JobSets come, deleted once none is
		// left (below).
		reportedIn := func(g Gomega) []string {
			report := &unstructured.Unstructured{}
			report.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"})
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "inplace-jobsetpolicies"}, report)).To(Succeed())
			results, _, _ := unstructured.NestedSlice(report.Object, "results")
			var names []string
			for _, r := range results {
				resources, _ := r.(map[string]any)["resources"].([]any)
				for _, res := range resources {
					names = append(names, res.(map[string]any)["name"].(string))
				}
			}
			return names
		}
		Eventually(reportedIn).WithTimeout(timeout).Should(ContainElement(reported.Name))

		By("a JobSet that finishes: ttlSecondsAfterFinished deletes it")
		done := wrappers.MakeJobSet("done", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).TTLSecondsAfterFinished(0).Obj()
		Expect(k8sClient.Create(ctx, done)).To(Succeed())
		annotate(expectOnePodRunning(done), simnode.ExitCodeAnnotation, "0")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(done), &jobset.JobSet{}))
		}).WithTimeout(timeout).Should(BeTrue(), "the finished JobSet is deleted")

		By("a JobSet whose Pods name a PriorityClass the cache does not show: the controller reads it past the cache")
		unclassed := wrappers.MakeReplicatedJob("w").Obj()
		unclassed.Template.Spec.Template.Spec.PriorityClassName = "no-such-class-" + ns.Name
		unclassedJS := wrappers.MakeJobSet("unclassed", ns.Name).ReplicatedJob(unclassed).Obj()
		Expect(k8sClient.Create(ctx, unclassedJS)).To(Succeed())
		Eventually(func(g Gomega) {
			var job batchv1.Job
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "unclassed-w-0"}, &job)).To(Succeed())
			g.Expect(job.Spec.Template.Labels).NotTo(HaveKey(jobset.PriorityKey), "a class that does not exist: no priority")
		}).WithTimeout(timeout).Should(Succeed())

		By("a JobSet with a volume claim: the webhook reads the claim's name, the controller creates it")
		claim := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		claimed := wrappers.MakeJobSet("claimed", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		worker := &claimed.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
		worker.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		claimed.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{claim}}}
		Expect(k8sClient.Create(ctx, claimed)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "data-claimed"}, &corev1.PersistentVolumeClaim{})
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(reportedIn).WithTimeout(timeout).Should(ContainElements(reported.Name, claimed.Name), "the PolicyReport updated with a new JobSet")

		By("a failed JobSet restarted by Recreate: its Jobs are deleted")
		recreated := wrappers.MakeJobSet("recreated", ns.Name).ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).
			FailurePolicy(&jobset.FailurePolicy{MaxRestarts: 1}).Obj()
		Expect(k8sClient.Create(ctx, recreated)).To(Succeed())
		annotate(expectOnePodRunning(recreated), simnode.ExitCodeAnnotation, "1")
		Eventually(func(g Gomega) {
			g.Expect(getJobSet(recreated).Status.Restarts).To(Equal(int32(1)))
		}).WithTimeout(timeout).Should(Succeed())

		By("two InPlaceRestart JobSets of two service accounts in one namespace: the agents' Role and RoleBinding grow")
		first := smallInPlace("first", ns.Name, 1)
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		expectRunning(first, 4, 1)
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: controller.AgentRoleName}, &rbacv1.Role{})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: ns.Name}})).To(Succeed())
		second := smallInPlace("second", ns.Name, 1)
		second.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "second"
		// Its agents report on their Pods, as agents that cannot reach
		// the controller fall back to: the agents' patch right is used.
		second.Annotations = map[string]string{protocol.AgentReportsAnnotation: protocol.AgentReportsPod}
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		expectRunning(second, 4, 1)

		By("an agent that crashes alone: restarted, it reads its own Pod to resume its epoch")
		crashAgent(podsOf(second)[1])
		expectRunning(second, 4, 1)

		By("suspending a JobSet that ran, and resuming it with a changed template")
		util.UpdateJobSet(ctx, k8sClient, first, func(js *jobset.JobSet) { js.Spec.Suspend = ptr.To(true) })
		Eventually(func(g Gomega) {
			g.Expect(podsOf(first)).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		util.UpdateJobSet(ctx, k8sClient, first, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(false)
			tmpl := &js.Spec.ReplicatedJobs[0].Template.Spec.Template
			tmpl.Labels = map[string]string{"e2e.inplace.dev/resumed": "true"}
		})
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns.Name), client.MatchingLabels{jobset.JobSetNameKey: first.Name})).To(Succeed())
			g.Expect(jobs.Items).NotTo(BeEmpty())
			for _, j := range jobs.Items {
				g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeFalse(), "job %s", j.Name)
				g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue("e2e.inplace.dev/resumed", "true"), "job %s", j.Name)
			}
		}).WithTimeout(timeout).Should(Succeed())

		By("a ConfigMap of another owner under a JobSet's broadcast name: read past the cache, refused, said again")
		foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName("squatted"), Namespace: ns.Name}}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		squatted := smallInPlace("squatted", ns.Name, 1)
		Expect(k8sClient.Create(ctx, squatted)).To(Succeed())
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			// Said again for the same version of the JobSet: a series.
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("Reason", decide.ReasonBroadcastConflict), HaveField("Series", Not(BeNil())))))
		}).WithTimeout(timeout).Should(Succeed())
		// Its agents watch the ConfigMap they were given, whoever made it.
		Eventually(func(g Gomega) {
			calls, err := util.ReadCalls(util.AuditLog(auditDir))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(util.CallsOf(calls, serviceaccount.MakeUsername(ns.Name, ""))).To(ContainElement(And(
				HaveField("Verb", "watch"), HaveField("Resource", "configmaps"), HaveField("Name", foreign.Name))))
		}).WithTimeout(timeout).Should(Succeed())

		By("a worker's fatal exit while its Pod's other container runs: the Pod is deleted")
		fatal := smallInPlace("fatal", ns.Name, 1)
		tmpl := &fatal.Spec.ReplicatedJobs[0].Template.Spec
		tmpl.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("worker"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}},
		}}}
		tmpl.Template.Spec.Containers = append(tmpl.Template.Spec.Containers, corev1.Container{Name: "logger", Image: "registry.example/logger:1"})
		fatal.Spec.FailurePolicy.Rules = []jobset.FailurePolicyRule{{Name: "fatal", Action: jobset.FailJobSet, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}}}
		Expect(k8sClient.Create(ctx, fatal)).To(Succeed())
		expectRunning(fatal, 4, 1)
		victim := podsOf(fatal)[0]
		annotate(victim, simnode.ExitCodeAnnotation, "3")
		Eventually(func(g Gomega) {
			var p corev1.Pod
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&victim), &p)
			g.Expect(apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.UID != victim.UID))).To(BeTrue(), "pod %s is not deleted", victim.Name)
			var events eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(observed(events, decide.ReasonFatalExitPodDeleted)).NotTo(BeZero())
		}).WithTimeout(timeout).Should(Succeed())

		var agentRole rbacv1.Role
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: controller.AgentRoleName}, &agentRole)).To(Succeed())

		By("deleting the InPlaceRestart JobSets: the agents' Role goes")
		// The agents of Pods being deleted may outlive their grants: their
		// calls from here on are not compared.
		deleting := time.Now()
		for _, js := range []*jobset.JobSet{first, second, squatted, fatal, claimed, recreated, reported, unclassedJS} {
			Expect(k8sClient.Delete(ctx, js)).To(Succeed())
		}
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: controller.AgentRoleName}, &rbacv1.Role{}))
		}).WithTimeout(timeout).Should(BeTrue())
		Eventually(func() bool {
			report := &unstructured.Unstructured{}
			report.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"})
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "inplace-jobsetpolicies"}, report))
		}).WithTimeout(timeout).Should(BeTrue(), "the PolicyReport of a namespace without JobSets is deleted")

		By("comparing every call each manager and the agents made with their Roles")
		calls, err := util.ReadCalls(util.AuditLog(auditDir))
		Expect(err).NotTo(HaveOccurred())
		for _, who := range []struct {
			users  string
			rules  []rbacv1.PolicyRule
			agents bool
		}{
			{users: controllerUser, rules: rulesOf("config/rbac/role.yaml")},
			{users: webhookUser, rules: rulesOf("config/rbac/webhook_role.yaml", "config/selfsigned/cabundle_role.yaml")},
			// This namespace's agents: the Role the controller made for
			// them, the ClusterRole it bound.
			{users: serviceaccount.MakeUsername(ns.Name, ""), rules: append(agentRole.Rules, rulesOf("config/agent/cluster-role.yaml")...), agents: true},
		} {
			of := slices.DeleteFunc(util.CallsOf(calls, who.users), func(c util.Call) bool {
				return who.agents && !c.Received.Before(deleting)
			})
			Expect(of).NotTo(BeEmpty(), "no call of %s* in the audit log", who.users)
			Expect(util.Denied(of)).To(BeEmpty(), "%s*: calls its Roles do not grant", who.users)
			var unused []string
			for _, r := range util.Rights(who.rules) {
				if _, ok := impliedRights[r]; ok || listedByWatch(r, of) || slices.ContainsFunc(of, r.Uses) {
					continue
				}
				unused = append(unused, r.String())
			}
			Expect(unused).To(BeEmpty(), "%s*: rights no call used; narrow the RBAC markers, or exercise them here", who.users)
		}
	})
})

// observed counts how often the Events of reason were observed, their
// series included.
func observed(events eventsv1.EventList, reason string) int32 {
	var n int32
	for _, e := range events.Items {
		if e.Reason != reason {
			continue
		}
		n++
		if e.Series != nil {
			n += e.Series.Count - 1
		}
	}
	return n
}
