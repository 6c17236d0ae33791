package deploy

import (
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/inplace-dev/inplace/test/cluster"
)

// The local install is what the local cluster (`make cluster-up`, under
// the tutorial, the examples and the demos) and the restart benchmark
// apply of config/ in place of config/default, and what the test suites
// and the admission benchmark take parts of: the same objects, except
// that the manager runs in the process that installs it, as two managers
// under the service accounts of config/rbac, rather than as Deployments
// behind Services, and signs its own webhook certificate rather than
// taking cert-manager's. TestLocalInstallIsConfigDefault compares the two
// and lists every deliberate difference: an object added to
// config/default is added here too, or there with the reason.
//
// In the order it is applied: CRDs (InstallCRDs, first), then, by
// RunManager, RBAC (ManagerConfig, before each manager starts), the
// admission policies (the agents' and the webhooks' exemption guard) and
// WebhookConfigurations (RegisterWebhooks, by URL). Apply creates the
// namespaces the objects name.

const (
	// OurCRDs is the kustomization of the project's CRDs: JobSet and
	// JobSetPolicy.
	OurCRDs = "config/crd"
	// PolicyReportCRDs is the kustomization of the wg-policy PolicyReport
	// and ClusterPolicyReport CRDs, in which the policy audit writes its
	// reports: without them it writes none.
	PolicyReportCRDs = "config/policyreport"

	// AgentPolicy is the kustomization of the agents' admission policy.
	AgentPolicy = "config/agent"
	// ExemptionGuard lets only the holders of the verb exempt label a
	// namespace out of the admission webhooks.
	ExemptionGuard = "config/webhook/exemption-guard.yaml"
	// WebhookConfigurations are the mutating and validating webhook
	// configurations, which RegisterWebhooks registers by URL.
	WebhookConfigurations = "config/webhook/manifests.yaml"
)

// CRDs are the kustomizations of the CRDs config/default installs.
var CRDs = []string{OurCRDs, PolicyReportCRDs}

// RBAC is the service accounts and Roles of an install without
// cert-manager: config/rbac, and config/selfsigned's right to write the
// webhook configurations' CA, which the in-process managers' self-signed
// webhooks use.
var RBAC = []string{
	"config/rbac/service_account.yaml", "config/rbac/role.yaml", "config/rbac/webhook_role.yaml", "config/rbac/role_binding.yaml",
	"config/selfsigned/cabundle_role.yaml", "config/selfsigned/cabundle_role_binding.yaml",
}

// LocalFiles returns every file of config/ whose objects the local install
// applies, relative to the repository root, in the order it applies them:
// what InstallCRDs, ManagerConfig, RunManager and RegisterWebhooks read.
func LocalFiles() ([]string, error) {
	files, err := kustomizationsFiles(CRDs...)
	if err != nil {
		return nil, err
	}
	files = append(files, RBAC...)
	policies, err := admissionPolicies()
	if err != nil {
		return nil, err
	}
	files = append(files, policies...)
	return append(files, WebhookConfigurations), nil
}

// admissionPolicies returns the files of the admission policies RunManager
// applies once the managers run: the agents' (AgentPolicy, as its
// kustomization lists it) and the webhooks' exemption guard.
func admissionPolicies() ([]string, error) {
	files, err := KustomizationFiles(AgentPolicy)
	if err != nil {
		return nil, err
	}
	return append(files, ExemptionGuard), nil
}

// CRDFiles returns the files of CRD kustomizations (CRDs, or some of
// them) as absolute paths, for envtest.
func CRDFiles(kustomizations ...string) ([]string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	files, err := kustomizationsFiles(kustomizations...)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		files[i] = filepath.Join(root, f)
	}
	return files, nil
}

// InstallCRDs installs the CRDs config/default installs (CRDs) and waits
// until the apiserver serves them.
func InstallCRDs(cfg *rest.Config) error {
	files, err := CRDFiles(CRDs...)
	if err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true})
	return err
}

func kustomizationsFiles(dirs ...string) ([]string, error) {
	var files []string
	for _, dir := range dirs {
		f, err := KustomizationFiles(dir)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}
