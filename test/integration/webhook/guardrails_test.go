package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// containerLimitsV0 is a Pod policy written the gatekeeper-library way:
// Rego v0, input.review.object.spec.containers, input.parameters and
// violation. It runs on JobSets with no edit.
const containerLimitsV0 = `package k8scontainerlimits

violation[{"msg": msg}] {
  container := input.review.object.spec.containers[_]
  not container.resources.limits.cpu
  msg := sprintf("container <%v> has no cpu limit", [container.name])
}

violation[{"msg": msg}] {
  container := input.review.object.spec.containers[_]
  input.parameters.memory
  not container.resources.limits.memory
  msg := sprintf("container <%v> has no memory limit", [container.name])
}
`

// teamQuota reads the JobSets the manager syncs into data.inventory.
const teamQuota = `package teamquota

deny contains msg if {
	team := input.object.metadata.labels[input.parameters.teamLabel]
	running := [name |
		some ns
		some name, js in data.inventory.namespace[ns]["jobset.x-k8s.io/v1alpha2"].JobSet
		js.metadata.labels[input.parameters.teamLabel] == team
		name != input.object.metadata.name
	]
	count(running) >= input.parameters.max
	msg := sprintf("team %s runs %d JobSets, its limit of %d", [team, count(running), input.parameters.max])
}
`

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func createPolicy(p *policyv1alpha1.JobSetPolicy) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed()) })
	expectReady(p, metav1.ConditionTrue)
}

var _ = Describe("Guardrails", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = fw.NewNamespace(ctx, k8sClient) })

	It("refuses parameters that break the policy's schema, naming the field", func() {
		policy := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "typed-max-restarts"},
			Spec: policyv1alpha1.JobSetPolicySpec{
				Rego:             maxRestartsRego,
				ParametersSchema: rawJSON(`{"type": "object", "required": ["limit"], "properties": {"limit": {"type": "integer", "minimum": 0}}}`),
				Parameters:       rawJSON(`{"limit": "ten"}`),
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(MatchError(ContainSubstring(`spec.parameters.limit: Invalid value: "string": limit in body must be of type integer`)))
		policy.Spec.Parameters = rawJSON(`{"limt": 10}`)
		Expect(k8sClient.Create(ctx, policy)).To(MatchError(SatisfyAll(
			ContainSubstring("spec.parameters.limit: Required value"),
			ContainSubstring(`spec.parameters.limt: Invalid value: "limt": unknown field: spec.parametersSchema names only limit here`))))
		policy.Spec.ParametersSchema = rawJSON(`{"type": "object", "properties": {"limit": {"description": "no type"}}}`)
		Expect(k8sClient.Create(ctx, policy)).To(MatchError(ContainSubstring("spec.parametersSchema.properties[limit].type: Required value")))

		// Valid: in force; an update to a wrong type is refused too, and
		// the version in force stays.
		policy.Spec.ParametersSchema = rawJSON(`{"type": "object", "required": ["limit"], "properties": {"limit": {"type": "integer", "minimum": 0}}}`)
		policy.Spec.Parameters = rawJSON(`{"limit": 3}`)
		createPolicy(policy)
		Eventually(func() error {
			return k8sClient.Create(ctx, withMaxRestarts("four", ns.Name, 4), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("above this cluster's limit of 3")))
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			policy.Spec.Parameters = rawJSON(`{"limit": -1}`)
			return k8sClient.Update(ctx, policy)
		})).To(MatchError(ContainSubstring("spec.parameters.limit: Invalid value: -1")))
	})

	It("runs a gatekeeper-library Pod policy on every Pod template, unedited", func() {
		createPolicy(&policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "container-limits"},
			Spec: policyv1alpha1.JobSetPolicySpec{
				Rego: containerLimitsV0, RegoVersion: policyv1alpha1.RegoV0, Target: policyv1alpha1.TargetPodTemplates,
				Parameters: rawJSON(`{"memory": true}`),
			},
		})
		limited := wrappers.MakeReplicatedJob("limited").Obj()
		limited.Template.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		cpuOnly := wrappers.MakeReplicatedJob("cpu-only").Obj()
		cpuOnly.Template.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}

		Eventually(func() error {
			return k8sClient.Create(ctx, wrappers.MakeJobSet("no-limits", ns.Name).ReplicatedJob(limited).ReplicatedJob(cpuOnly).Obj(), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(SatisfyAll(
			ContainSubstring("container-limits: replicatedJobs[cpu-only]: container <worker> has no memory limit"),
			Not(ContainSubstring("replicatedJobs[limited]")))))
		Expect(k8sClient.Create(ctx, wrappers.MakeJobSet("limits", ns.Name).ReplicatedJob(limited).Obj(), client.DryRunAll)).To(Succeed())
	})

	It("reads other objects in data.inventory, and agrees offline with the same objects as fixtures", func() {
		spec := policyv1alpha1.JobSetPolicySpec{
			Rego:             teamQuota,
			ParametersSchema: rawJSON(`{"type": "object", "properties": {"teamLabel": {"type": "string", "default": "team"}, "max": {"type": "integer"}}}`),
			Parameters:       rawJSON(`{"max": 1}`),
		}
		createPolicy(&policyv1alpha1.JobSetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-quota"}, Spec: spec})
		first := wrappers.MakeJobSet("first", ns.Name).Label("team", "vision").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		second := wrappers.MakeJobSet("second", ns.Name).Label("team", "vision").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Eventually(func() error {
			return k8sClient.Create(ctx, second.DeepCopy(), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("team-quota: team vision runs 1 JobSets, its limit of 1")))
		other := wrappers.MakeJobSet("other", ns.Name).Label("team", "speech").ReplicatedJob(wrappers.MakeReplicatedJob("w").Obj()).Obj()
		Expect(k8sClient.Create(ctx, other, client.DryRunAll)).To(Succeed())

		// Offline, the stored JobSet as a fixture: the same verdict.
		engine, err := policies.NewEngine([]string{})
		Expect(err).NotTo(HaveOccurred())
		p, err := jobsetpolicy.Compile("team-quota", &spec, nil, engine)
		Expect(err).NotTo(HaveOccurred())
		engine.SetPolicy(p)
		var stored map[string]any
		raw, err := json.Marshal(first)
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(raw, &stored)).To(Succeed())
		Expect(engine.Inventory().Put(ctx, policies.InventoryObject{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: ns.Name, Name: "first", Object: stored})).To(Succeed())
		d, err := engine.Evaluate(ctx, policies.Input{Operation: "CREATE", Object: asMap(second), Namespace: ns.Name, Labels: second.Labels})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Denied).To(ContainElement(HaveField("Message", "team vision runs 1 JobSets, its limit of 1")))

		// Gone from the cluster, gone from the inventory.
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Create(ctx, second.DeepCopy(), client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	It("matches operations and users, and exempts the users it excludes", func() {
		createPolicy(&policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "no-creates-but-ci"},
			Spec: policyv1alpha1.JobSetPolicySpec{
				Rego:    "package nocreates\n\ndeny contains sprintf(\"%s may not create JobSets here\", [input.review.userInfo.username]) if true\n",
				Match:   &policyv1alpha1.Match{Operations: []policyv1alpha1.Operation{"CREATE"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns.Name}}},
				Exclude: &policyv1alpha1.Exclude{Users: []string{"system:serviceaccount:ci:*"}},
			},
		})
		ci := "system:serviceaccount:ci:deployer"
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "jobset-creator-"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"create", "get", "update"}}}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, role)).To(Succeed()) })
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "jobset-creator-"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}}}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, binding)).To(Succeed()) })
		restCfg := rest.CopyConfig(cfg)
		restCfg.Impersonate = rest.ImpersonationConfig{UserName: ci}
		asCI, err := client.New(restCfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())

		js := withMaxRestarts("by-hand", ns.Name, 1)
		Eventually(func() error { return k8sClient.Create(ctx, js.DeepCopy(), client.DryRunAll) }).
			WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("may not create JobSets here")))
		Eventually(func() error { return asCI.Create(ctx, js.DeepCopy(), client.DryRunAll) }).
			WithTimeout(10*time.Second).Should(Succeed(), "the CI service account is excluded")
		// Updates are not matched: a JobSet created by CI stays editable.
		Expect(asCI.Create(ctx, js)).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(js), js)).To(Succeed())
			js.Labels = map[string]string{"edited": "yes"}
			return k8sClient.Update(ctx, js)
		})).To(Succeed())
	})
})

var _ = Describe("The policy library", func() {
	It("is admitted as it is by the apiserver and the JobSetPolicy webhook", func() {
		root, err := cluster.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		files, err := filepath.Glob(filepath.Join(root, "policies/library/*/policy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 10))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			var p policyv1alpha1.JobSetPolicy
			Expect(yaml.UnmarshalStrict(raw, &p)).To(Succeed(), f)
			Eventually(func() error { return k8sClient.Create(ctx, &p, client.DryRunAll) }).
				WithTimeout(10*time.Second).Should(Succeed(), f)
		}
	})
})
