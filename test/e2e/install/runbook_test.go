package install

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/docpage"
	"github.com/inplace-dev/inplace/test/util"
)

// runbookBlock is one command block of docs/how-to/operate.md: its
// commands, as the page writes them, under its section (the nearest
// "## " heading).
type runbookBlock struct {
	section string
	script  string
}

// runbookBlocks reads the ```sh blocks of a Markdown page, indented or
// not, in order, each under its section: the "## " heading it is under.
func runbookBlocks(page string) ([]runbookBlock, error) {
	p, err := docpage.Read(page)
	if err != nil {
		return nil, err
	}
	var blocks []runbookBlock
	for _, b := range p.Blocks {
		if b.Info == "sh" {
			blocks = append(blocks, runbookBlock{section: p.Section(b.Line, 2).Text, script: strings.TrimSuffix(b.Text, "\n")})
		}
	}
	return blocks, nil
}

// runbookOutcome is what one block does on the install the drill runs it
// on: the exit status, and a piece of what it prints.
type runbookOutcome struct {
	exit   int
	prints string
	// why a block does not succeed here: what the test cluster lacks, or
	// what the page says the command finds on a healthy install.
	why string
}

// runbookOutcomes are the outcomes of operate.md's blocks, by the block's
// first line as the page writes it. A block whose first line is not here
// fails the drill: every command of the page runs.
var runbookOutcomes = map[string]runbookOutcome{
	"inplacectl status NAME -n NAMESPACE":                                                               {prints: "in place"},
	"kubectl get events -A --field-selector reason=InPlaceRestartTimedOut":                              {prints: "No resources found"},
	"kubectl apply --dry-run=server -n NAMESPACE -f JOBSET.yaml":                                        {prints: "created (server dry run)"},
	"kubectl -n inplace-system top pods -l app.kubernetes.io/component=webhook":                         {exit: 1, prints: "Metrics API not available", why: "the test cluster runs no metrics server"},
	"kubectl -n inplace-system logs -l app.kubernetes.io/component=webhook \\":                          {exit: 1, why: "grep finds none of the failures the page looks for on a healthy install"},
	"kubectl get jobsetpolicy POLICY":                                                                   {prints: "Ready=True"},
	"kubectl get jobsetpolicy POLICY -o yaml":                                                           {prints: "name: max-restarts"},
	"kubectl -n inplace-system get pods -l app.kubernetes.io/component=webhook":                         {prints: "Running"},
	"kubectl -n inplace-system logs POD":                                                                {prints: "Last State:"},
	"kubectl get --raw \"/api/v1/namespaces/inplace-system/pods/POD:8081/proxy/readyz?verbose\"":        {prints: "healthz check passed"},
	"kubectl -n inplace-system get endpointslices \\":                                                   {prints: " ready=true"},
	"kubectl -n inplace-system rollout status deploy/inplace-webhook":                                   {prints: "created (server dry run)"},
	"kubectl -n inplace-system logs POD --previous":                                                     {prints: `"msg":"starting inplace-manager"`},
	"kubectl -n inplace-system get configmap inplace-manager-config -o yaml | grep selfSignedCerts":     {exit: 1, why: "an install with cert-manager sets no selfSignedCerts"},
	"kubectl -n inplace-system get certificate inplace-ca inplace-serving-cert":                         {prints: "inplace-serving-cert"},
	"kubectl -n inplace-system describe certificate inplace-serving-cert":                               {prints: "inplace-selfsigned-issuer"},
	"for c in mutatingwebhookconfiguration/inplace-mutating-webhook \\":                                 {prints: "validatingwebhookconfiguration/inplace-validating-webhook: same"},
	"kubectl -n inplace-system rollout restart deploy/inplace-webhook":                                  {prints: `deployment "inplace-webhook" successfully rolled out`},
	"kubectl -n inplace-system get deploy inplace-webhook":                                              {prints: "2/2"},
	"inplacectl status NAME -n NAMESPACE -o wide":                                                       {prints: "in place"},
	"kubectl get pods -n NAMESPACE -l jobset.sigs.k8s.io/jobset-name=NAME -o wide":                      {prints: "Running"},
	"kubectl logs -n NAMESPACE POD -c inplace-agent":                                                    {prints: "epoch"},
	"kubectl describe jobset NAME -n NAMESPACE":                                                         {prints: "InPlaceRestart"},
	"kubectl get jobset NAME -n NAMESPACE \\":                                                           {prints: "Z\n"},
	"kubectl delete jobs -n NAMESPACE -l jobset.sigs.k8s.io/jobset-name=NAME":                           {prints: "deleted"},
	"kubectl describe pod -n NAMESPACE POD":                                                             {prints: "inplace-agent"},
	"kubectl -n inplace-system rollout restart deploy/inplace-manager deploy/inplace-webhook":           {prints: `deployment "inplace-webhook" successfully rolled out`},
	"kubectl get jobsetpolicies":                                                                        {prints: "Ready=True"},
	"kubectl get events -n default --field-selector involvedObject.name=POLICY":                         {prints: "No resources found"},
	"kubectl patch jobsetpolicy POLICY --type merge -p '{\"spec\":{\"enforcementAction\":\"DryRun\"}}'": {prints: "patched"},
	"kubectl get jobsetpolicy POLICY -o yaml > POLICY.yaml":                                             {prints: "deleted"},
	"kubectl auth can-i patch namespaces":                                                               {prints: "yes"},
	"kubectl create clusterrolebinding inplace-webhook-exemption-oncall \\":                             {prints: "created"},
	"kubectl label namespace NAMESPACE inplace.dev/webhooks=disabled":                                   {prints: "labeled"},
	"kubectl label namespace NAMESPACE inplace.dev/webhooks-":                                           {prints: "unlabeled"},
	"kubectl -n inplace-system edit configmap inplace-manager-config":                                   {prints: "Edit cancelled, no changes made."},
	"kubectl -n inplace-system get pods -l app.kubernetes.io/component=manager":                         {prints: "Running"},
	"kubectl get events -n default --field-selector involvedObject.name=jobsets.jobset.x-k8s.io":        {exit: 1, why: "a controller that was never held logs no upstream-jobset line"},
	"kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0":                  {exit: 1, prints: "Error from server (NotFound)", why: "the test cluster does not run upstream JobSet: test/e2e/upstream does"},
	"kubectl apply --server-side --force-conflicts -f jobset-crd.yaml":                                  {prints: "serverside-applied"},
	"kubectl -n inplace-system rollout status deploy/inplace-manager":                                   {prints: `deployment "inplace-manager" successfully rolled out`},
	"kubectl -n inplace-system get lease inplace-manager inplace-manager-webhook":                       {prints: "inplace-manager-webhook"},
}

// runbookPods says which Pod POD stands for in a section of the runbook,
// and gets it ready for the section's commands: a webhook replica that
// crashed once, a manager replica that did, or a worker of the JobSet.
func runbookPod(section string, js *jobset.JobSet) string {
	GinkgoHelper()
	switch {
	case strings.Contains(section, "webhook"):
		return crashedOnce(map[string]string{"app.kubernetes.io/component": "webhook"})
	case strings.Contains(section, "manager"):
		return crashedOnce(map[string]string{"app.kubernetes.io/component": "manager"})
	default:
		// A running Pod of a Job that is not being deleted: the runbook
		// deletes the JobSet's Jobs in one section, and their Pods go
		// some moments later.
		var pod string
		Eventually(func(g Gomega) {
			var jobs batchv1.JobList
			g.Expect(k8sClient.List(ctx, &jobs, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
			live := map[types.UID]bool{}
			for _, j := range jobs.Items {
				live[j.UID] = j.DeletionTimestamp == nil
			}
			pods := util.JobSetPods(ctx, k8sClient, js)
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
				owner := metav1.GetControllerOf(&p)
				return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && owner != nil && live[owner.UID]
			})
			g.Expect(i).NotTo(Equal(-1), "a running Pod of a live Job")
			pod = pods[i].Name
		}).WithTimeout(timeout).Should(Succeed(), "a Pod of %s", js.Name)
		return pod
	}
}

// crashedOnce kills the container of a running Pod of the install that
// matches selector, as a crash would, and returns the Pod's name once its
// kubelet has started the container again and it is ready.
func crashedOnce(selector map[string]string) string {
	GinkgoHelper()
	var p corev1.Pod
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels(selector))).To(Succeed())
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
			return p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
		})
		g.Expect(i).NotTo(Equal(-1), "a ready Pod of %v", selector)
		p = pods.Items[i]
	}).WithTimeout(timeout).Should(Succeed())
	killAndWaitReady(p)
	return p.Name
}

// drillsTheRunbook runs every command of docs/how-to/operate.md against
// the install, in the page's order, with its placeholders filled in: a
// JobSet restarted in place once, its namespace, the example policy, and
// for POD the Pod each section is about. dist is the release the install
// came from. Each block must end as runbookOutcomes says.
func drillsTheRunbook(dist string) {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	page, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "operate.md"))
	Expect(err).NotTo(HaveOccurred())
	blocks, err := runbookBlocks(string(page))
	Expect(err).NotTo(HaveOccurred(), "docs/how-to/operate.md")
	Expect(len(blocks)).To(BeNumerically(">", 40), "operate.md's command blocks")

	// The commands run in a directory of their own, with the files they
	// name: the page's example, a JobSet's manifest, the release's CRD.
	dir := GinkgoT().TempDir()
	Expect(os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples"))).To(Succeed())
	Expect(os.Symlink(filepath.Join(dist, "jobset-crd.yaml"), filepath.Join(dir, "jobset-crd.yaml"))).To(Succeed())
	tools := scriptTools(root)

	sh("kubectl apply -f examples/policies/max-restarts-policy.yaml")
	ns := fw.NewNamespace(ctx, k8sClient)
	util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	js := util.WorkerJobSet("runbook", ns.Name, 2, nil)
	Expect(k8sClient.Create(ctx, js)).To(Succeed())
	util.ExpectWorkersRunning(ctx, k8sClient, js, 2, 1, timeout)
	restartsInPlace(js, 2)
	dry := util.WorkerJobSet("runbook-dry-run", ns.Name, 2, nil)
	dry.SetGroupVersionKind(jobset.GroupVersion.WithKind("JobSet"))
	manifest, err := yaml.Marshal(dry)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "runbook-dry-run.yaml"), manifest, 0o600)).To(Succeed())
	DeferCleanup(func() {
		binding := &rbacv1.ClusterRoleBinding{}
		binding.Name = "inplace-webhook-exemption-oncall"
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
	})

	pods := map[string]string{} // by section
	for _, b := range blocks {
		first, _, _ := strings.Cut(b.script, "\n")
		want, ok := runbookOutcomes[first]
		Expect(ok).To(BeTrue(), "operate.md (%s) runs %q: say in runbookOutcomes what it does on the install", b.section, first)
		script := b.script
		if strings.Contains(script, "POD") {
			if _, ok := pods[b.section]; !ok {
				pods[b.section] = runbookPod(b.section, js)
			}
		}
		values := map[string]string{
			"NAMESPACE":   ns.Name,
			"NAME":        js.Name,
			"JOBSET.yaml": "runbook-dry-run.yaml",
			"POLICY":      "max-restarts",
			"POD":         pods[b.section],
			"GROUP":       "oncall",
		}
		script = placeholder.ReplaceAllStringFunc(script, func(p string) string { return values[p] })
		out, exit := runScript(dir, tools, script)
		Expect(exit).To(Equal(want.exit), "operate.md (%s):\n%s\nprinted:\n%s\n(expected because: %s)", b.section, script, out, cmp.Or(want.why, "it works on a healthy install"))
		Expect(out).To(ContainSubstring(want.prints), "operate.md (%s):\n%s", b.section, script)
		if !strings.Contains(want.prints, "Error from server") {
			// A grep that finds nothing must have had something to read.
			Expect(out).NotTo(ContainSubstring("Error from server"), "operate.md (%s):\n%s", b.section, script)
		}
	}
	deleteJobSet(js)
}

// placeholder is a word of operate.md's commands that stands for a name
// the reader knows: a JobSet, its namespace, a Pod, a policy, a group.
var placeholder = regexp.MustCompile(`\b(NAMESPACE|NAME|JOBSET\.yaml|POLICY|POD|GROUP)\b`)

// scriptTools is a directory for the PATH with the commands the
// runbook calls: inplacectl, built from the tree, and the cluster's
// kubectl.
func scriptTools(root string) string {
	GinkgoHelper()
	tools := GinkgoT().TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tools, "inplacectl"), "./cmd/inplacectl")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/inplacectl: %s", out)
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Symlink(filepath.Join(bin, "kubectl"), filepath.Join(tools, "kubectl"))).To(Succeed())
	return tools
}

// runScript runs a block in bash, as the page asks, stopping at the
// first command that fails, and returns what it printed and its exit
// status. kubectl edit's editor saves nothing.
func runScript(dir, tools, script string) (string, int) {
	GinkgoHelper()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+fw.Cluster.Kubeconfig, "PATH="+tools+":"+os.Getenv("PATH"), "HOME="+dir, "KUBE_EDITOR=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	GinkgoWriter.Printf("$ %s\n%s", script, out.String())
	if runCtx.Err() != nil {
		Fail(fmt.Sprintf("%s: did not end within %v:\n%s", script, timeout, out.String()))
	}
	if exitErr := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exitErr) {
		Fail(fmt.Sprintf("%s: bash did not run: %v", script, err))
	}
	return out.String(), cmd.ProcessState.ExitCode()
}
