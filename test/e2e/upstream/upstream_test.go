package upstream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/inplace-dev/inplace/cmd/inplacectl/migration"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
)

const (
	// The drop-in install and the Deployment upstream's suite waits for
	// (its NAMESPACE, jobset-system unless set).
	dropIn     = "kubectl apply --server-side -k config/jobset-names"
	rollout    = "kubectl -n jobset-system rollout status deployment/jobset-controller-manager --timeout=3m"
	namespace  = upstreamjobset.Namespace
	deployment = upstreamjobset.Deployment
	// upstreamSpecs is how many specs upstream's suite holds at the
	// version hack/upstream-jobset pins.
	upstreamSpecs = 12
	// suiteTimeout bounds upstream's suite; its own specs wait up to 10
	// minutes each for what they expect.
	suiteTimeout = 25 * time.Minute
)

// run runs a command line as a user of the cluster would
// (framework.Run).
func run(limit time.Duration, env []string, name string, args ...string) (string, error) {
	GinkgoHelper()
	return fw.Run(ctx, limit, env, name, args...)
}

// summary is the end of a ginkgo run's report: what ran, and the counts.
var summary = regexp.MustCompile(`(?m)^Ran \d+ of \d+ Specs in .*$|^(SUCCESS|FAIL)! -- .*$`)

// pushImages pushes the images the specs name to the cluster's registry.
func pushImages() {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	By("pushing Debian's bash as docker.io/library/bash:latest and debian:12, and upstream's agent and controller, to the cluster's registry")
	pushed, err := images.PushBash(ctx, root, filepath.Join(bin, "images"), fw.Cluster.Registry, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	agent, controller, err := upstreamjobset.PushImages(ctx, root, bin, fw.Cluster.Registry, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("pushed %v, %s and %s\n", pushed, agent, controller)
}

// installDropIn installs inplace under upstream's names, as
// docs/how-to/install.md says, and checks that the migration check tells
// it from upstream's controller.
func installDropIn() {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "install.md"))
	Expect(err).NotTo(HaveOccurred())
	Expect(string(doc)).To(And(ContainSubstring(dropIn), ContainSubstring(rollout)), "docs/how-to/install.md shows the commands")

	By("installing inplace under upstream's names: " + dropIn)
	out, err := run(time.Minute, nil, "sh", "-c", dropIn)
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(ContainSubstring("namespace/" + namespace + " serverside-applied"))
	Expect(out).To(ContainSubstring("deployment.apps/" + deployment + " serverside-applied"))
	objects := strings.Count(out, " serverside-applied")
	Expect(string(doc)).To(ContainSubstring(dropIn+"\n   ```\n\n   It prints one line for each of its %d objects", objects), "docs/how-to/install.md counts the objects")
	out, err = run(3*time.Minute, nil, "sh", "-c", rollout)
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(ContainSubstring(`deployment "` + deployment + `" successfully rolled out`))

	By("telling the drop-in from upstream's controller, as the migration check reads the cluster")
	// inplacectl migrate, with its defaults.
	in, err := migration.Gather(ctx, k8sClient, migration.Options{})
	Expect(err).NotTo(HaveOccurred())
	Expect(in.Upstream).To(BeEmpty(), "the drop-in's Deployment is not upstream's")
	Expect(in.Manager).To(HaveExactElements(And(HaveField("Name", deployment), HaveField("Ours", true), HaveField("Available", BeNumerically(">", 0)))))
}

// passesUpstreamSuite runs upstream's e2e suite, built from its module,
// against inplace's drop-in install, and prints its summary.
func passesUpstreamSuite() {
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	suite := filepath.Join(bin, "jobset-e2e.test")
	Expect(suite).To(BeAnExistingFile(), "upstream's suite is built by 'make cluster-binaries'")
	// Its process outlives ginkgo's own limit by a minute: time for its
	// report.
	out, err := run(suiteTimeout+time.Minute, []string{"NAMESPACE=" + namespace}, suite, "-test.v", "-test.timeout="+suiteTimeout.String(), "-ginkgo.no-color", "-ginkgo.timeout="+suiteTimeout.String())
	report := summary.FindAllString(out, -1)
	// make test-upstream shows it: the Go test's output with -v (ginkgo's
	// report entries show only with its own -v).
	fmt.Printf("upstream JobSet's e2e suite:\n%s\n", joinLines(report))
	Expect(err).NotTo(HaveOccurred(), "upstream's suite failed:\n%s", out)
	Expect(report).To(ContainElement(MatchRegexp(`^Ran %d of %d Specs in `, upstreamSpecs, upstreamSpecs)), "every spec ran:\n%s", out)
	Expect(report).To(ContainElement(fmt.Sprintf("SUCCESS! -- %d Passed | 0 Failed | 0 Pending | 0 Skipped", upstreamSpecs)), "every spec passed, none skipped:\n%s", out)
}

var _ = Describe("upstream JobSet v0.12.0, built from its module", Ordered, func() {
	// The migration's namespace outlives the spec that fills it.
	AfterAll(func(ctx context.Context) {
		if managedNamespace == "" {
			return
		}
		if CurrentSpecReport().Failed() {
			framework.DumpNamespace(ctx, k8sClient, managedNamespace)
		}
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managedNamespace}}))).To(Succeed())
	})
	It("runs five JobSets as its release manifests install it: running, restarted, completed, suspended, and in place with its agent", installUpstream)
	It("hands them to inplace installed under upstream's names, by docs/how-to/migrate-from-jobset.md, with nothing recreated", migrates)
	It("passes its own e2e suite against inplace", passesUpstreamSuite)
	It("runs its agent's sidecar-mode example under inplace's controller: a worker's exit restarts every Pod in place, up to maxRestarts", func() {
		restartsEveryPodInPlace(upstreamExample(upstreamjobset.SidecarExample, agentNamespace()), "worker")
	})
	It("runs its agent's main-container-mode example under inplace's controller: the agent runs the worker, and its exit restarts every Pod in place, up to maxRestarts", func() {
		restartsEveryPodInPlace(upstreamExample(upstreamjobset.MainContainerExample, agentNamespace()), "in-place-restart-agent")
	})
	It("syncs a group that mixes its agent with inplace's", mixesAgents)
})

func joinLines(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
