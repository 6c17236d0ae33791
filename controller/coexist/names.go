package coexist

// The names upstream JobSet (kubernetes-sigs/jobset) gives its objects, as
// its kustomize manifests (config/default: namespace jobset-system, name
// prefix jobset-) and its Helm chart (release jobset) install them.
const (
	// CRDName is the JobSet CustomResourceDefinition's, ours and upstream's.
	CRDName = "jobsets.jobset.x-k8s.io"

	// UpstreamNamespace is where upstream's manifests install its
	// controller, and where it elects its leader.
	UpstreamNamespace = "jobset-system"

	// UpstreamMutatingWebhook and UpstreamValidatingWebhook are upstream's
	// webhook configurations (both installs). They call its webhook
	// Service with failurePolicy Fail for JobSets and, for the mutating
	// one, Pods labelled jobset.sigs.k8s.io/jobset-name: once that Service
	// has no endpoint, the API server refuses every such write.
	UpstreamMutatingWebhook   = "jobset-mutating-webhook-configuration"
	UpstreamValidatingWebhook = "jobset-validating-webhook-configuration"
)

// ApplyCRD is the command that installs or replaces the JobSet CRD with
// inplace's: server-side, taking over the fields another manager of the
// CRD holds (upstream's kubectl apply, or Helm, which installed an earlier
// release's). A release ships the CRD alone as jobset-crd.yaml.
const ApplyCRD = "kubectl apply --server-side --force-conflicts -f jobset-crd.yaml (from the release, or config/crd/bases/jobset.x-k8s.io_jobsets.yaml in the source)"

// UpstreamLeaseNames are the Leases upstream's controller renews while it
// runs and leads: 6d4f6a47.jobset.x-k8s.io since its configuration API
// (DefaultLeaderElectionID), 6d4f6a47.x-k8s.io before. Both are looked for
// in its namespace.
var UpstreamLeaseNames = []string{"6d4f6a47.jobset.x-k8s.io", "6d4f6a47.x-k8s.io"}

// UpstreamDeployments are upstream controller's Deployment: kustomize's
// jobset-controller-manager, the Helm chart's jobset-controller.
var UpstreamDeployments = []string{"jobset-controller-manager", "jobset-controller"}
