package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// thirdPartyCRDs are the CRDs config/ refers to, from the projects' own
// modules: cert-manager's Issuer and Certificate, the Prometheus
// Operator's ServiceMonitor and PrometheusRule.
var thirdPartyCRDs = []struct{ module, files string }{
	{"github.com/cert-manager/cert-manager@v1.19.1", "deploy/crds/cert-manager.io_*.yaml"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
}

// InstallThirdPartyCRDs installs the CRDs of cert-manager and the
// Prometheus Operator, so that the apiserver validates our Certificate,
// Issuer and ServiceMonitor against their real schemas. Their modules come
// from the Go module proxy.
func InstallThirdPartyCRDs(ctx context.Context, cfg *rest.Config) error {
	var paths []string
	for _, m := range thirdPartyCRDs {
		out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", m.module).Output()
		if err != nil {
			return fmt.Errorf("downloading %s: %w", m.module, err)
		}
		var info struct{ Dir string }
		if err := json.Unmarshal(out, &info); err != nil {
			return fmt.Errorf("reading where %s is: %w", m.module, err)
		}
		files, err := filepath.Glob(filepath.Join(info.Dir, m.files))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no %s in %s (%s)", m.files, m.module, info.Dir)
		}
		paths = append(paths, files...)
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	return err
}
