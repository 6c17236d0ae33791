package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobsetv1alpha2 "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
)

// Framework starts and stops the control plane of one suite.
type Framework struct {
	// Name labels log artifacts of this suite.
	Name string
	// FullCluster starts etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler; otherwise only envtest's etcd and kube-apiserver run.
	FullCluster bool

	// Webhooks serves the admission webhooks from the manager StartManager
	// starts, over TLS, registered with the apiserver from
	// config/webhook/manifests.yaml.
	Webhooks bool
	// LeaderElection runs the managers StartManager starts with leader
	// election, each role under its Lease, as installed.
	LeaderElection bool
	// ServeMetrics serves each manager's metrics over HTTPS, with
	// authentication and authorization, as installed, at MetricsURL.
	ServeMetrics bool
	// Configure, if set, edits the manager configuration before start.
	Configure func(*configv1alpha1.Configuration)

	// RealNodes, with FullCluster, starts that many real nodes (a kubelet
	// and a containerd each) beside the control plane.
	RealNodes int
	// ExtraImages are image archives the real nodes import besides the
	// project's.
	ExtraImages []string
	// Registry, with FullCluster, starts an image registry beside the
	// control plane, at Cluster.Registry.
	Registry bool
	// NoCRDs leaves the CRDs out of Init, for suites that install them as
	// a user does.
	NoCRDs bool
	// PolicyReports installs the wg-policy PolicyReport CRDs too
	// (config/policyreport): every CRD config/default installs, as the
	// local cluster does (deploy.CRDs).
	PolicyReports bool
	// APIServerFlags are set on the kube-apiserver.
	APIServerFlags map[string]string

	// Cluster is the running local cluster when FullCluster is set.
	Cluster *cluster.Cluster

	env         *envtest.Environment
	failed      bool
	cancel      context.CancelFunc
	stopManager func()
	writesMu    sync.Mutex
	writes      []string
	webhookPort int
	metricsURLs map[string]string
	webhookDir  string
	metrics     prometheus.Gatherers
}

// Scheme knows the built-in types and the JobSet API.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	return s
}()

// Init starts the control plane, installs the CRDs and returns an admin
// REST config. It fails the suite on error.
func (f *Framework) Init() *rest.Config {
	ginkgo.GinkgoHelper()
	bin, err := cluster.BinDir()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	kustomizations := []string{deploy.OurCRDs}
	if f.PolicyReports {
		kustomizations = deploy.CRDs
	}
	crds, err := deploy.CRDFiles(kustomizations...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(f.FullCluster || f.RealNodes == 0 && !f.Registry).To(gomega.BeTrue(), "RealNodes and Registry need FullCluster")

	if f.FullCluster {
		f.Cluster, err = cluster.Start(context.Background(), cluster.Options{Name: f.Name, RealNodes: f.RealNodes, ExtraImageArchives: f.ExtraImages, APIServerFlags: f.APIServerFlags, Registry: f.Registry})
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "starting the local cluster")
		if f.NoCRDs {
			return rest.CopyConfig(f.Cluster.Config)
		}
		_, err = envtest.InstallCRDs(f.Cluster.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true})
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "installing CRDs")
		return rest.CopyConfig(f.Cluster.Config)
	}

	if f.NoCRDs {
		crds = nil
	}
	f.env = &envtest.Environment{
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: bin,
	}
	f.env.ControlPlane.GetAPIServer().Configure().Set("feature-gates", cluster.FeatureGates)
	for k, v := range f.APIServerFlags {
		f.env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	cfg, err := f.env.Start()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "starting envtest")
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// SetupClient returns a context cancelled at Teardown and a client using
// Scheme.
func (f *Framework) SetupClient(cfg *rest.Config) (context.Context, client.Client) {
	ginkgo.GinkgoHelper()
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	return ctx, c
}

// Teardown stops everything Init started; component logs are kept when a
// spec that used NewNamespace failed.
func (f *Framework) Teardown() {
	ginkgo.GinkgoHelper()
	f.StopManager()
	if f.cancel != nil {
		f.cancel()
	}
	if f.Cluster != nil {
		err := f.Cluster.Stop(f.failed)
		if f.failed {
			ginkgo.GinkgoWriter.Printf("component logs kept in %s\n", f.Cluster.LogsDir())
		}
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	if f.env != nil {
		gomega.Expect(f.env.Stop()).To(gomega.Succeed())
	}
}

// NewNamespace creates a namespace for one spec, deleted after it; when the
// spec fails, the namespace's objects and events are written to GinkgoWriter
// first, and Teardown keeps the component logs.
func (f *Framework) NewNamespace(ctx context.Context, c client.Client) *corev1.Namespace {
	ginkgo.GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	gomega.Expect(c.Create(ctx, ns)).To(gomega.Succeed())
	ginkgo.DeferCleanup(func(ctx context.Context) {
		if ginkgo.CurrentSpecReport().Failed() {
			f.failed = true
			DumpNamespace(ctx, c, ns.Name)
		}
		gomega.Expect(client.IgnoreNotFound(c.Delete(ctx, ns))).To(gomega.Succeed())
	})
	return ns
}

// DumpNamespace writes the JobSets, Jobs, Pods and Events of a namespace to
// GinkgoWriter.
func DumpNamespace(ctx context.Context, c client.Client, namespace string) {
	w := ginkgo.GinkgoWriter
	fmt.Fprintf(w, "\n=== dump of namespace %s\n", namespace)
	var jobsets jobsetv1alpha2.JobSetList
	if err := c.List(ctx, &jobsets, client.InNamespace(namespace)); err == nil {
		for _, js := range jobsets.Items {
			fmt.Fprintf(w, "JobSet %s: restarts=%d terminal=%q epochs=%d/%d conditions=%v\n",
				js.Name, js.Status.Restarts, js.Status.TerminalState, js.Status.DeprecatedEpoch, js.Status.SyncedEpoch, js.Status.Conditions)
		}
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(namespace)); err == nil {
		for _, j := range jobs.Items {
			fmt.Fprintf(w, "Job %s: active=%d ready=%v succeeded=%d failed=%d conditions=%v\n",
				j.Name, j.Status.Active, ptr.Deref(j.Status.Ready, 0), j.Status.Succeeded, j.Status.Failed, j.Status.Conditions)
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(w, "Pod %s: node=%q phase=%s deleting=%v epoch=%q finalizers=%v\n", p.Name, p.Spec.NodeName, p.Status.Phase,
				p.DeletionTimestamp != nil, p.Annotations[jobsetv1alpha2.EpochKey], p.Finalizers)
		}
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(namespace)); err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(w, "Event %s %s/%s %s: %s\n", e.LastTimestamp.Format(time.RFC3339), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// WriteKubeconfig writes a kubeconfig for cfg's server and credentials
// (client certificate or bearer token) into a temporary directory of the
// spec and returns its path.
func WriteKubeconfig(cfg *rest.Config) string {
	ginkgo.GinkgoHelper()
	path := filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
	gomega.Expect(clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"user": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "user"}},
		CurrentContext: "local",
	}, path)).To(gomega.Succeed())
	return path
}
