package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/framework"
)

// readSpec reads a JobSet of the specifications' manifests
// (test/testdata/specs).
func readSpec(root, file string) (*jobset.JobSet, error) {
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "specs", file))
	if err != nil {
		return nil, err
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &js, nil
}

// startAPIServer starts a kube-apiserver and etcd with the CRDs
// config/default installs, and returns its configuration, allowing qps
// requests a second, a client of it, and the function that stops it.
func startAPIServer(qps float32) (*rest.Config, client.Client, func(), error) {
	bin, err := cluster.BinDir()
	if err != nil {
		return nil, nil, nil, err
	}
	crds, err := deploy.CRDFiles(deploy.CRDs...)
	if err != nil {
		return nil, nil, nil, err
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting the apiserver: %w", err)
	}
	stop := func() { _ = env.Stop() }
	cfg.QPS, cfg.Burst = qps, int(qps)
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return cfg, c, stop, nil
}
