package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies/report"
	"github.com/inplace-dev/inplace/test/framework"
)

const (
	writeAPolicy = "how-to/write-a-policy.md"
	// timeout bounds what the test waits for between two commands.
	timeout = 20 * time.Second
	// The page's names: its policy, and the namespace and JobSet of its
	// steps 4 and 6.
	policyName = "max-restarts"
	namespace  = "research-a"
	jobSetName = "train"

	// Commands of the page, as it shows them.
	getPolicy    = "kubectl get jobsetpolicy max-restarts"
	dryRunCreate = `kubectl patch jobsetpolicy max-restarts --type merge -p '{"spec":{"enforcementAction":"DryRun"}}'
kubectl wait --for=condition=Ready jobsetpolicy/max-restarts
kubectl apply -f guardrails/train.yaml`
	// readEvents is in the page's prose, after dryRunCreate.
	readEvents = "kubectl -n research-a events --for jobset/train"
)

var _ = Describe("docs/how-to/write-a-policy.md", func() {
	It("prints what the page shows at every step, its commands run as written", func() {
		page, steps := readPage(writeAPolicy)
		dir := GinkgoT().TempDir()
		kubeconfig := framework.WriteKubeconfig(cfg)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				framework.DumpNamespace(ctx, k8sClient, namespace)
			}
		})

		// What the page says in words between two of its commands, done as
		// the reader does it.
		before := map[string]func(){
			// Step 5 shows the audit's count, which the reader sees once
			// the policy's first audit has run.
			getPolicy: func() {
				Eventually(func(g Gomega) {
					var p policyv1alpha1.JobSetPolicy
					g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: policyName}, &p)).To(Succeed())
					g.Expect(p.Status.Audit).NotTo(BeNil(), "the policy's first audit")
				}).WithTimeout(timeout).Should(Succeed())
			},
		}
		// What the page says follows a command, checked.
		after := map[string]func(){
			dryRunCreate: func() {
				By("a Warning Event on the JobSet, read as the page says")
				Expect(strings.Join(strings.Fields(page), " ")).To(ContainSubstring("`"+readEvents+"`"), "the page says how to read the Event")
				Eventually(func(g Gomega) {
					out, exit := run(dir, kubeconfig, readEvents)
					g.Expect(exit).To(BeZero(), "%s:\n%s", readEvents, out)
					g.Expect(out).To(And(
						MatchRegexp(`Warning +PolicyViolationDryRun +JobSet/train `),
						ContainSubstring("max-restarts: spec.failurePolicy.maxRestarts is 30, above this cluster's limit of 20: lower it"),
					))
				}).WithTimeout(timeout).Should(Succeed())

				By("the audit lists research-a/train in the policy's status and the namespace's PolicyReport")
				Eventually(func(g Gomega) {
					var p policyv1alpha1.JobSetPolicy
					g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: policyName}, &p)).To(Succeed())
					g.Expect(p.Status.Audit).NotTo(BeNil())
					g.Expect(p.Status.Audit.Violations).To(ContainElement(And(
						HaveField("Namespace", namespace), HaveField("Name", jobSetName),
					)))
				}).WithTimeout(timeout).Should(Succeed())
				Eventually(func(g Gomega) {
					polr := &unstructured.Unstructured{}
					polr.SetGroupVersionKind(report.GroupVersion.WithKind("PolicyReport"))
					g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: report.ReportName}, polr)).To(Succeed())
					results, _, err := unstructured.NestedSlice(polr.Object, "results")
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(results).To(ContainElement(And(
						HaveKeyWithValue("policy", policyName),
						HaveKeyWithValue("result", "fail"),
						HaveKeyWithValue("resources", ContainElement(HaveKeyWithValue("name", jobSetName))),
					)))
				}).WithTimeout(timeout).Should(Succeed())
			},
		}

		ran := map[string]bool{}
		for _, s := range steps {
			if s.file != "" {
				By(fmt.Sprintf("line %d: writing %s", s.line, s.file))
				path := filepath.Join(dir, s.file)
				Expect(os.MkdirAll(filepath.Dir(path), 0o750)).To(Succeed())
				Expect(os.WriteFile(path, []byte(s.text), 0o600)).To(Succeed())
				continue
			}
			command := strings.TrimSuffix(s.command, "\n")
			ran[command] = true
			if f, ok := before[command]; ok {
				f()
			}
			By(fmt.Sprintf("line %d: %s", s.line, command))
			out, exit := run(dir, kubeconfig, command)
			GinkgoWriter.Printf("$ %s\n%s[exit status %d]\n", command, out, exit)
			Expect(normalize(out)).To(Equal(normalize(s.output)), "line %d: %s prints what the page shows\n--- the page:\n%s--- the run:\n%s", s.line, command, s.output, out)
			Expect(exit).To(Equal(s.exit), "line %d: %s exits as the page says (0 unless it says another)", s.line, command)
			if f, ok := after[command]; ok {
				f()
			}
		}
		for command := range before {
			Expect(ran).To(HaveKey(command), "the page no longer shows a command the test waits before")
		}
		for command := range after {
			Expect(ran).To(HaveKey(command), "the page no longer shows a command the test checks after")
		}
	})

	It("shows the example files it names as the same", func() {
		_, steps := readPage(writeAPolicy)
		files := map[string]string{}
		for _, s := range steps {
			if s.file != "" {
				files[s.file] = s.text
			}
		}
		example := func(name string) string {
			data, err := os.ReadFile(filepath.Join(root, "examples", "policies", name))
			Expect(err).NotTo(HaveOccurred())
			return string(data)
		}
		// The page indents its Rego with spaces, where the examples, as
		// opa fmt writes them, indent with tabs.
		for page, ex := range map[string]string{
			"guardrails/max_restarts.rego":      "max_restarts.rego",
			"guardrails/max_restarts_test.rego": "max_restarts_test.rego",
		} {
			Expect(files).To(HaveKey(page))
			Expect(files[page]).To(Equal(strings.ReplaceAll(example(ex), "\t", "    ")), "%s is examples/policies/%s", page, ex)
		}

		// The same policy as examples/policies/max-restarts-policy.yaml,
		// with a schema.
		Expect(files).To(HaveKey("guardrails/max-restarts.yaml"))
		var onPage, ex map[string]any
		Expect(yaml.Unmarshal([]byte(files["guardrails/max-restarts.yaml"]), &onPage)).To(Succeed())
		Expect(yaml.Unmarshal([]byte(example("max-restarts-policy.yaml")), &ex)).To(Succeed())
		spec, ok := onPage["spec"].(map[string]any)
		Expect(ok).To(BeTrue())
		Expect(spec).To(HaveKey("parametersSchema"))
		delete(spec, "parametersSchema")
		Expect(onPage).To(Equal(ex))
	})
})
