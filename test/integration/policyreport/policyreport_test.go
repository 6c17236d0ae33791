package policyreport

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/policies/reconciler"
	"github.com/inplace-dev/inplace/policies/report"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/wrappers"
)

const requireTeam = `package requireteam

deny contains "the JobSet has no label team" if {
	not input.object.metadata.labels.team
}
`

// result is what the spec checks of one result of a report.
type result struct {
	Policy, JobSet, UID, Outcome, Message, Action string
	Timestamp                                     report.Timestamp
}

// readReport returns the results and the summary of a namespace's report,
// and its resourceVersion; NotFound if there is none.
func readReport(namespace string) ([]result, map[string]any, string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(report.GroupVersion.WithKind("PolicyReport"))
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: report.ReportName}, u); err != nil {
		return nil, nil, "", err
	}
	Expect(u.GetLabels()).To(HaveKeyWithValue(report.ManagedByLabel, report.ManagedBy))
	Expect(u.Object).NotTo(HaveKey("scope"), "the report covers its namespace")
	items, _, err := unstructured.NestedSlice(u.Object, "results")
	Expect(err).NotTo(HaveOccurred())
	var out []result
	for _, it := range items {
		m := it.(map[string]any)
		Expect(m).To(HaveKeyWithValue("source", "inplace"))
		Expect(m).To(HaveKeyWithValue("scored", true))
		resources, _, _ := unstructured.NestedSlice(m, "resources")
		Expect(resources).To(HaveLen(1))
		res := resources[0].(map[string]any)
		Expect(res).To(HaveKeyWithValue("apiVersion", "jobset.x-k8s.io/v1alpha2"))
		Expect(res).To(HaveKeyWithValue("kind", "JobSet"))
		Expect(res).To(HaveKeyWithValue("namespace", namespace))
		action, _, _ := unstructured.NestedString(m, "properties", "enforcementAction")
		seconds, _, _ := unstructured.NestedInt64(m, "timestamp", "seconds")
		nanos, _, _ := unstructured.NestedInt64(m, "timestamp", "nanos")
		message, _ := m["message"].(string)
		out = append(out, result{
			Policy: m["policy"].(string), JobSet: res["name"].(string), UID: res["uid"].(string),
			Outcome: m["result"].(string), Message: message, Action: action,
			Timestamp: report.Timestamp{Seconds: seconds, Nanos: int32(nanos)},
		})
	}
	summary, _, _ := unstructured.NestedMap(u.Object, "summary")
	return out, summary, u.GetResourceVersion(), nil
}

func summary(pass, fail int64) map[string]any {
	return map[string]any{"pass": pass, "fail": fail, "warn": int64(0), "error": int64(0), "skip": int64(0)}
}

// gauge reads a gauge without labels from reg.
func gauge(reg *prometheus.Registry, name string) float64 {
	GinkgoHelper()
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	Fail("no metric " + name)
	return 0
}

var _ = Describe("the policy audit's PolicyReports", func() {
	It("lists every JobSet a policy applies to, per namespace, and changes only what changed", func() {
		first := time.Unix(1_800_000_000, 0)
		clock := clocktesting.NewFakePassiveClock(first)
		stamp := report.TimestampOf(first)

		By("creating JobSets in two namespaces, then a Deny policy")
		ns1, ns2 := fw.NewNamespace(ctx, k8sClient).Name, fw.NewNamespace(ctx, k8sClient).Name
		create := func(ns, name string, labels ...string) *jobsetv1alpha2.JobSet {
			w := wrappers.MakeJobSet(name, ns).ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj())
			for i := 0; i+1 < len(labels); i += 2 {
				w.Label(labels[i], labels[i+1])
			}
			js := w.Obj()
			Expect(k8sClient.Create(ctx, js)).To(Succeed())
			return js
		}
		noTeam, withTeam := create(ns1, "no-team"), create(ns1, "with-team", "team", "a")
		alone := create(ns2, "alone")
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "require-team"},
			Spec:       policyv1alpha1.JobSetPolicySpec{Rego: requireTeam},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })

		names, err := policies.BuiltinNames()
		Expect(err).NotTo(HaveOccurred())
		engine, err := policies.NewEngine(names) // the audit runs admin policies only
		Expect(err).NotTo(HaveOccurred())
		compiled, err := jobsetpolicy.Compile(policy.Name, &policy.Spec, nil, engine)
		Expect(err).NotTo(HaveOccurred())
		engine.SetPolicy(compiled)

		reg := prometheus.NewRegistry()
		metrics, err := report.NewMetrics(reg)
		Expect(err).NotTo(HaveOccurred())
		auditor := &reconciler.Auditor{
			Client: k8sClient, Engine: engine, Interval: time.Minute, Clock: clock, Workers: 2,
			Reports: &report.Writer{Client: k8sClient, Clock: clock, Metrics: metrics},
		}

		By("auditing without the PolicyReport CRD: the policy's status is written, no report")
		Expect(auditor.Audit(ctx)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
		Expect(policy.Status.Audit).NotTo(BeNil())
		Expect(policy.Status.Audit.TotalViolations).To(BeEquivalentTo(2))
		Expect(gauge(reg, "inplace_policy_reports_enabled")).To(BeZero())

		By("installing the CRD from config/policyreport and auditing again")
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "config", "policyreport")}, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(auditor.Audit(ctx)).To(Succeed())
		Expect(gauge(reg, "inplace_policy_reports_enabled")).To(Equal(1.0))

		const message = "the JobSet has no label team"
		results, sum, _, err := readReport(ns1)
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(Equal([]result{
			{Policy: "require-team", JobSet: "no-team", UID: string(noTeam.UID), Outcome: "fail", Message: message, Action: "Deny", Timestamp: stamp},
			{Policy: "require-team", JobSet: "with-team", UID: string(withTeam.UID), Outcome: "pass", Action: "Deny", Timestamp: stamp},
		}))
		Expect(sum).To(Equal(summary(1, 1)))
		results, sum, rv2, err := readReport(ns2)
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(Equal([]result{
			{Policy: "require-team", JobSet: "alone", UID: string(alone.UID), Outcome: "fail", Message: message, Action: "Deny", Timestamp: stamp},
		}))
		Expect(sum).To(Equal(summary(0, 1)))

		By("labelling one JobSet to fix it: only its result changes, the others keep their timestamps")
		later := first.Add(time.Minute)
		clock.SetTime(later)
		patch := client.MergeFrom(noTeam.DeepCopy())
		noTeam.Labels = map[string]string{"team": "b"}
		Expect(k8sClient.Patch(ctx, noTeam, patch)).To(Succeed())
		Expect(auditor.Audit(ctx)).To(Succeed())
		results, sum, _, err = readReport(ns1)
		Expect(err).NotTo(HaveOccurred())
		Expect(results).To(Equal([]result{
			{Policy: "require-team", JobSet: "no-team", UID: string(noTeam.UID), Outcome: "pass", Action: "Deny", Timestamp: report.TimestampOf(later)},
			{Policy: "require-team", JobSet: "with-team", UID: string(withTeam.UID), Outcome: "pass", Action: "Deny", Timestamp: stamp},
		}))
		Expect(sum).To(Equal(summary(2, 0)))
		_, _, rv, err := readReport(ns2)
		Expect(err).NotTo(HaveOccurred())
		Expect(rv).To(Equal(rv2), "the report of %s, unchanged, was written again", ns2)

		By("deleting the only JobSet of the second namespace: its report goes, the first's stays")
		Expect(k8sClient.Delete(ctx, alone)).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(alone), &jobsetv1alpha2.JobSet{}) }).
			Should(Satisfy(apierrors.IsNotFound))
		Expect(auditor.Audit(ctx)).To(Succeed())
		_, _, _, err = readReport(ns2)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the report of %s: %v", ns2, err)
		_, sum, _, err = readReport(ns1)
		Expect(err).NotTo(HaveOccurred())
		Expect(sum).To(Equal(summary(2, 0)))

		families, err := reg.Gather()
		Expect(err).NotTo(HaveOccurred())
		writes := map[string]float64{}
		for _, f := range families {
			if f.GetName() == "inplace_policy_report_writes_total" {
				for _, m := range f.GetMetric() {
					writes[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		Expect(writes).To(Equal(map[string]float64{"created": 2, "updated": 1, "deleted": 1, "error": 0}), fmt.Sprint(writes))
	})
})
