package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// registryConfig is a CNCF Distribution registry that serves plain HTTP on
// addr, stores under dir and lets images be deleted: a throwaway registry
// for one cluster, like its etcd. secret signs its upload state.
func registryConfig(addr, dir, secret string) string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
`, dir, addr, secret)
}

// startRegistry starts the cluster's image registry (Options.Registry) on
// port of 127.0.0.1 and waits until it answers the distribution API's base
// endpoint. A containerd pulls from a loopback address over plain HTTP
// without configuration, so a real node's kubelet runs an image pushed
// there as <Registry>/<name>:<tag>.
func (c *Cluster) startRegistry(ctx context.Context, port int) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := filepath.Join(c.workDir, "registry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, []byte(registryConfig(addr, filepath.Join(dir, "storage"), rand.Text())), 0o600); err != nil {
		return err
	}
	p, err := startProcess("registry", c.binary("registry"), []string{"serve", config},
		// Its traces would go to an OTLP collector on this host by default.
		[]string{"OTEL_TRACES_EXPORTER=none"}, c.logDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	if err := p.waitFor(ctx, "its API", httpOK(&http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/v2/")); err != nil {
		return err
	}
	c.Registry = addr
	if c.registryHosts, err = writeRegistryHosts(filepath.Join(dir, "hosts"), addr); err != nil {
		return fmt.Errorf("mirroring registries to the cluster's: %w", err)
	}
	return nil
}

// MirroredRegistries are the registries whose images the real nodes pull
// from the cluster's registry first (Options.Registry): an image pushed
// there as <Registry>/library/bash:latest is what a node runs for
// docker.io/library/bash:latest, one pushed as
// <Registry>/e2e-test-images/agnhost:2.63.0 for
// registry.k8s.io/e2e-test-images/agnhost:2.63.0. Suites and manifests
// written for other clusters (upstream JobSet's, Kueue's, Kubeflow
// Trainer's) name such images and pull them Always; this machine reaches
// none of these registries. An image the mirror does
// not hold is pulled from the registry itself, as without a mirror.
var MirroredRegistries = map[string]string{
	"docker.io":       "https://registry-1.docker.io",
	"ghcr.io":         "https://ghcr.io",
	"registry.k8s.io": "https://registry.k8s.io",
}

// writeRegistryHosts writes under dir containerd's hosts configuration
// that mirrors MirroredRegistries to the registry at addr, once for every
// node's containerd (config_path), and returns dir.
func writeRegistryHosts(dir, addr string) (string, error) {
	for host, server := range MirroredRegistries {
		d := filepath.Join(dir, host)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, "http://"+addr)
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
