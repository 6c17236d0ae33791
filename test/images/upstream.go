package images

import (
	"context"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// UpstreamAgent is the repository and tag, in the local cluster's
// registry, of upstream JobSet's in-place restart agent
// (sigs.k8s.io/jobset/cmd/in-place-restart-agent, built from its module
// by 'make cluster-binaries' as bin/jobset-in-place-restart-agent). The
// real nodes' containerd mirrors registry.k8s.io to that registry, so a
// Pod runs it as UpstreamAgentImage, the name upstream would publish it
// under.
const (
	UpstreamAgent      = "jobset/in-place-restart-agent:v0.12.0"
	UpstreamAgentImage = "registry.k8s.io/" + UpstreamAgent
)

// upstreamAgentBinary is where upstream's Dockerfile puts the agent.
const upstreamAgentBinary = "/in-place-restart-agent"

// PushUpstreamAgent pushes upstream's agent, the binary at binary, to
// registry, a host:port serving plain HTTP, as UpstreamAgent, and returns
// its reference. One image serves both of upstream's modes: the binary as
// its Dockerfile installs it (its entrypoint, run as 65532) on the root
// file system of PushBash, whose bash runs WORKER_COMMAND in
// main-container mode (upstream's Dockerfile-main-container-mode adds a
// shell the same way).
func PushUpstreamAgent(ctx context.Context, root, cacheDir, binary, registry string, log io.Writer) (string, error) {
	base, err := debianLayer(ctx, root, cacheDir, log)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	agent, err := layerOf(nil, entry{path: upstreamAgentBinary, mode: 0o755, data: data})
	if err != nil {
		return "", err
	}
	img, err := configuredImage(func(c *v1.Config) {
		c.Entrypoint = []string{upstreamAgentBinary}
		c.User = nonRootID + ":" + nonRootID
		c.Env = []string{debianPath}
	}, base, agent)
	if err != nil {
		return "", err
	}
	return push(ctx, img, registry, UpstreamAgent)
}

// UpstreamController is the repository and tag, in the local cluster's
// registry, of upstream JobSet's controller (sigs.k8s.io/jobset, built
// from its module by 'make cluster-binaries' as bin/jobset-controller).
// The real nodes pull it as UpstreamControllerImage, the image upstream's
// release manifests name.
const (
	UpstreamController      = "jobset/jobset:v0.12.0"
	UpstreamControllerImage = "registry.k8s.io/" + UpstreamController
)

// PushUpstreamController packs the controller binary at binary as
// upstream's Dockerfile does and pushes it to registry as
// UpstreamController. It returns the image's reference in registry.
func PushUpstreamController(ctx context.Context, binary, registry string) (string, error) {
	return pushManager(ctx, binary, registry, UpstreamController)
}
