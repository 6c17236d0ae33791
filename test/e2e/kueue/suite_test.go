package kueue

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/docpage"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
	kueueinstall "github.com/inplace-dev/inplace/test/kueue"
)

var (
	// Three real nodes: two labelled as the workers of the kind cluster
	// Kueue's suite is written for (instance-type on-demand and spot), one
	// for the control plane's Pods. No manager in the test process: the
	// drop-in install runs it in the cluster, with the CRDs it installs.
	fw        = &framework.Framework{Name: "kueue", FullCluster: true, RealNodes: 3, NoCRDs: true, Registry: true}
	cfg       *rest.Config
	ctx       context.Context
	k8sClient client.Client
)

// Kueue's install and the wait for it, as docs/how-to/kueue.md shows
// them: the release's manifests, which the suite renders from the
// module's config/default (what the release is made of).
const (
	kueueRelease = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/download/" + images.KueueVersion + "/manifests.yaml"
	kueueRollout = "kubectl -n kueue-system rollout status deployment/kueue-controller-manager --timeout=3m"
)

func TestKueue(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Kueue, built from its module, in front of inplace on real kubelets")
}

var _ = BeforeSuite(func() {
	ctrllog.SetLogger(GinkgoLogr)
	cfg = fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	labelNodes()
	pushImages()
	install()
	buildPlugin()
})

// pluginDir holds the kubectl plugin kubectl-inplace, built from the tree.
var pluginDir string

// buildPlugin builds kubectl-inplace for `kubectl inplace status`, as
// docs/how-to/kueue.md runs it.
func buildPlugin() {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	pluginDir = GinkgoT().TempDir()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(pluginDir, "kubectl-inplace"), "./cmd/kubectl-inplace")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building kubectl-inplace: %s", out)
}

// inplaceStatus is what `kubectl inplace status` prints for the JobSet
// name of namespace ns.
func inplaceStatus(name, ns string) string {
	GinkgoHelper()
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	env := []string{"PATH=" + pluginDir + ":" + bin + ":" + os.Getenv("PATH")}
	out, err := fw.Run(ctx, time.Minute, env, "kubectl", "inplace", "status", name, "-n", ns)
	Expect(err).NotTo(HaveOccurred(), out)
	return out
}

var _ = AfterSuite(func() {
	fw.Teardown()
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real nodes stopped:\n%s", strings.Join(left, "\n"))
	}
})

// instanceTypes label the real nodes as Kueue's kind cluster labels its
// workers; the third node has none. Every node is in a block (blocks),
// for topology-aware scheduling.
var instanceTypes = []string{"on-demand", "spot"}

func labelNodes() {
	GinkgoHelper()
	names := fw.Cluster.NodeNames()
	Expect(names).To(HaveLen(len(blocks)))
	for i, name := range names {
		var node corev1.Node
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &node)).To(Succeed())
		patch := client.MergeFrom(node.DeepCopy())
		if i < len(instanceTypes) {
			node.Labels["instance-type"] = instanceTypes[i]
		}
		node.Labels[blockLabel] = blocks[i]
		Expect(k8sClient.Patch(ctx, &node, patch)).To(Succeed())
	}
}

// pushImages pushes Kueue's manager and agnhost to the cluster's registry.
func pushImages() {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	By("pushing Kueue's manager and agnhost, built from their modules, to the cluster's registry")
	pushed, err := kueueinstall.PushImages(ctx, root, bin, fw.Cluster.Registry, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("pushed %v\n", pushed)
}

// install installs inplace under upstream JobSet's names, then Kueue from
// its module's manifests, in that order: Kueue enables its JobSet
// integration only if the JobSet CRD is there when it starts.
func install() {
	GinkgoHelper()
	Expect(page()).To(And(ContainSubstring(framework.DropIn), ContainSubstring(framework.DropInRollout)), "docs/how-to/kueue.md shows the install")
	fw.InstallDropIn(ctx)

	By("installing Kueue " + kueueinstall.Module.Version + " from its module's manifests")
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	manifests, err := kueueinstall.Manifests(ctx, root, GinkgoT().TempDir(), "")
	Expect(err).NotTo(HaveOccurred())
	out, err := fw.Run(ctx, 3*time.Minute, nil, "kubectl", "apply", "--server-side", "-f", manifests)
	Expect(err).NotTo(HaveOccurred(), out)
	rolledOut := `deployment "` + kueueinstall.Deployment + `" successfully rolled out`
	Expect(page()).To(And(ContainSubstring(kueueRollout), ContainSubstring(rolledOut), ContainSubstring(kueueRelease)), "docs/how-to/kueue.md shows the commands and what they print")
	out, err = fw.Run(ctx, 3*time.Minute, nil, "sh", "-c", kueueRollout)
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(ContainSubstring(rolledOut))
}

// page is docs/how-to/kueue.md.
func page() string {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "kueue.md"))
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// pageBlocks are the code blocks of docs/how-to/kueue.md of language
// info, each without the indentation of its list item.
func pageBlocks(info string) []string {
	GinkgoHelper()
	doc, err := docpage.Read(page())
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, b := range doc.Blocks {
		if b.Info == info {
			out = append(out, b.Text)
		}
	}
	return out
}
