package trainer

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/kubeflowtrainer"
)

// nodes is how many real nodes the suite runs: one PyTorch Pod per node,
// two ranks per Pod, as examples/pytorch.
const nodes = 2

var (
	// No manager in the test process: the drop-in install runs it in the
	// cluster, with the CRDs it installs.
	fw        = &framework.Framework{Name: "trainer", FullCluster: true, RealNodes: nodes, NoCRDs: true, Registry: true}
	ctx       context.Context
	k8sClient client.Client
	clientset *kubernetes.Clientset
)

// The commands of docs/how-to/kubeflow-trainer.md.
const (
	trainerRollout = "kubectl -n kubeflow-system rollout status deployment/kubeflow-trainer-controller-manager --timeout=3m"
	applyPolicy    = "kubectl apply -f policies/library/trainer-restart-in-place/policy.yaml"
	applyRuntime   = "kubectl apply -f examples/pytorch/trainer/runtime.yaml"
)

func TestTrainer(t *testing.T) {
	cluster.SkipWithoutRealNodes(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Kubeflow Trainer, built from its module, on inplace on real kubelets")
}

var _ = BeforeSuite(func() {
	ctrllog.SetLogger(GinkgoLogr)
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	// Debian's packages are cached in bin/images: only a cold machine
	// builds the root file system.
	buildCtx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	img, err := images.BuildPyTorch(buildCtx, root, filepath.Join(bin, "images"), filepath.Join(GinkgoT().TempDir(), "inplace-pytorch.tar"), GinkgoWriter)
	Expect(err).NotTo(HaveOccurred(), "building the PyTorch image")
	fw.ExtraImages = []string{img.Archive}
	cfg := fw.Init()
	ctx, k8sClient = fw.SetupClient(cfg)
	clientset = kubernetes.NewForConfigOrDie(cfg)

	By("pushing Trainer's manager, built from its module, to the cluster's registry")
	ref, err := kubeflowtrainer.PushImage(ctx, bin, fw.Cluster.Registry)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("pushed %s\n", ref)

	// JobSet first: Trainer's JobSet plugin needs the JobSet CRD.
	Expect(page()).To(And(ContainSubstring(framework.DropIn), ContainSubstring(framework.DropInRollout)))
	fw.InstallDropIn(ctx)

	By("installing Kubeflow Trainer " + kubeflowtrainer.Module.Version + " from its module's manifests, as docs/how-to/kubeflow-trainer.md's kustomization")
	expectPageKustomization()
	manifests, err := kubeflowtrainer.Manifests(ctx, root, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	out, err := fw.Run(ctx, 3*time.Minute, nil, "kubectl", "apply", "--server-side", "-f", manifests)
	Expect(err).NotTo(HaveOccurred(), out)
	runPage("", trainerRollout, 3*time.Minute, `deployment "`+kubeflowtrainer.Deployment+`" successfully rolled out`)

	By("applying the policy and the runtime")
	runPage("", applyPolicy, time.Minute, "jobsetpolicy.policy.inplace.dev/trainer-restart-in-place created")
	// Trainer's webhooks answer once its certificate is mounted: until
	// then the apply fails calling them, and is tried again.
	const created = "clustertrainingruntime.trainer.kubeflow.org/torch-inplace-example created"
	Expect(page()).To(And(ContainSubstring(applyRuntime), ContainSubstring(created)))
	Eventually(func() error {
		out, err := fw.Run(ctx, time.Minute, nil, "sh", "-c", applyRuntime)
		if err != nil && !strings.Contains(out, "failed calling webhook") {
			StopTrying("applying the runtime: " + out).Now()
		}
		if err != nil {
			return &runError{out}
		}
		Expect(out).To(ContainSubstring(created))
		return nil
	}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
})

var _ = AfterSuite(func() {
	fw.Teardown()
	if fw.Cluster != nil {
		left := fw.Cluster.LeftOnHost()
		Expect(left).To(BeEmpty(), "the host differs after the real nodes stopped:\n%s", strings.Join(left, "\n"))
	}
})

// runError is a command's output as the error it failed with.
type runError struct{ out string }

func (e *runError) Error() string { return e.out }
