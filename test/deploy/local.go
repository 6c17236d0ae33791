package deploy

import (
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/inplace-dev/inplace/test/cluster"
)

const (
	// OurCRDs is the kustomization of the project's CRDs: JobSet and
	// JobSetPolicy.
	OurCRDs = "config/crd"
	// PolicyReportCRDs is the kustomization of the wg-policy PolicyReport
	// and ClusterPolicyReport CRDs, in which the policy audit writes its
	// reports: without them it writes none.
	PolicyReportCRDs = "config/policyreport"
)

// CRDs are the kustomizations of the CRDs config/default installs, which
// the local cluster and the benchmarks install too (InstallCRDs).
var CRDs = []string{OurCRDs, PolicyReportCRDs}

// ExemptionGuard lets only the holders of the verb exempt label a
// namespace out of the admission webhooks.
const ExemptionGuard = "config/webhook/exemption-guard.yaml"

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
