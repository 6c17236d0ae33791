package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/webhook/certs"
)

// The real nodes' network: one bridge on the host, its address the
// gateway of every Pod and the address of every node (the kubelet refuses
// a loopback node IP). The range never leaves the machine: no route, no
// masquerade.
const (
	podSubnet   = "10.244.0.0/16"
	nodeIP      = "10.244.0.1"
	podGateway  = nodeIP
	cniBinDir   = "/usr/lib/cni"
	hostLock    = "/run/lock/inplace-real-nodes.lock"
	stateFile   = "host-state.json"
	kubeletName = "kubelet"
)

// realNode is one node: a kubelet and its own containerd (two kubelets on
// one containerd kill each other's Pods as orphans).
type realNode struct {
	name       string
	dir        string
	socket     string
	cgroupRoot string
	port       int
	// kubeletArgs start its kubelet again after StopKubelet.
	kubeletArgs []string
}

// NodeNames are the names of the cluster's real nodes.
func (c *Cluster) NodeNames() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.name)
	}
	return out
}

// CgroupRoots are the real nodes' cgroup roots (kubelet cgroupRoot), one
// per node: every Pod's containers run below its node's, in each cgroup v1
// hierarchy.
func (c *Cluster) CgroupRoots() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.cgroupRoot)
	}
	return out
}

// PodLogsDir is where a real node's kubelet writes its Pods' container logs.
func (c *Cluster) PodLogsDir(node string) string {
	return filepath.Join(c.workDir, "nodes", node, "pod-logs")
}

// RealNodesRequired reports whether real-node tests must run rather than be
// skipped where real nodes cannot run (not root, no cgroup v1): CI sets
// INPLACE_REAL_NODES=required, so that a missing prerequisite fails there.
func RealNodesRequired() bool { return os.Getenv("INPLACE_REAL_NODES") == "required" }

// SkipWithoutRealNodes skips a test that needs real nodes under -short,
// and where they cannot run unless RealNodesRequired.
func SkipWithoutRealNodes(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local cluster with real nodes")
	}
	if err := RealNodesUnavailable(); err != nil && !RealNodesRequired() {
		t.Skipf("real nodes cannot run here: %v (INPLACE_REAL_NODES=required makes this a failure)", err)
	}
}

// RealNodesUnavailable says why real nodes cannot run on this machine, or
// returns nil.
func RealNodesUnavailable() error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	return checkRealNodePrerequisites(bin)
}

func checkRealNodePrerequisites(binDir string) error {
	var missing []string
	for _, b := range []string{"runc", "iptables", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		missing = append(missing, cniBinDir+"/bridge")
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s: run 'make node-deps' (Debian's runc, containernetworking-plugins, iptables)", strings.Join(missing, ", "))
	}
	for _, b := range append([]string{kubeletName, corednsName, provisionerBinary}, containerdBinaries...) {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("real nodes need %s in %s: run 'make cluster-binaries'", b, binDir)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root: they run containerd and kubelets, make a bridge and cgroups")
	}
	if fi, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil || !fi.IsDir() {
		return errors.New("real nodes here need the cgroup v1 hierarchies (a hybrid host, as Debian 12 with systemd.unified_cgroup_hierarchy=0 or without systemd): /sys/fs/cgroup/cpu is missing")
	}
	return nil
}

// lockHost takes the machine-wide lock of real nodes, waiting as long as
// ctx allows: their stacks share host paths (/run/containerd, /var/lib/cni)
// whose teardown must not race another cluster's.
func lockHost(ctx context.Context) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(hostLock), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(hostLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("waiting for another real-node cluster on this machine to stop (%s): %w", hostLock, err)
	}
	return f, nil
}

// startRealNodes starts c.opts.RealNodes nodes beside the control plane.
func (c *Cluster) startRealNodes(ctx context.Context, p *pki, apiPort int) error {
	// Names unique to this cluster's working directory (a PID may be reused
	// by a later run while a crashed one's leftovers wait for the sweep),
	// short enough for an interface name (15 characters).
	sum := sha256.Sum256([]byte(c.workDir))
	id := hex.EncodeToString(sum[:4])
	c.host.Bridge = "inpl" + id
	c.host.NATChain = "INPLACE-APISERVER-" + id
	c.host.ForwardChain = "INPLACE-FORWARD-" + id
	c.netName = "inplace-" + id
	c.host.WorkDir = c.workDir
	for i := range c.opts.RealNodes {
		c.nodes = append(c.nodes, &realNode{
			name:       fmt.Sprintf("real-%d", i),
			dir:        filepath.Join(c.workDir, "nodes", fmt.Sprintf("real-%d", i)),
			cgroupRoot: fmt.Sprintf("/inplace-%s-real-%d", id, i),
		})
		c.host.CgroupRoot = append(c.host.CgroupRoot, c.nodes[i].cgroupRoot)
	}
	// Saved before anything is created: a run that dies from here on is
	// undone by the next start's sweep.
	if err := c.host.save(filepath.Join(c.workDir, stateFile)); err != nil {
		return err
	}
	if err := c.setUpNetwork(apiPort); err != nil {
		return fmt.Errorf("setting up the nodes' network: %w", err)
	}
	bridgesHere.Add(1)
	c.ownsBridge = true
	if err := c.startDNS(ctx); err != nil {
		return fmt.Errorf("starting the cluster's DNS: %w", err)
	}
	if err := c.startStorage(ctx); err != nil {
		return fmt.Errorf("starting the cluster's volume provisioner: %w", err)
	}
	archives := c.opts.ImageArchives
	ports, err := FreePorts(len(c.nodes))
	if err != nil {
		return err
	}
	for i, n := range c.nodes {
		n.port = ports[i]
		if err := c.startNode(ctx, p, n, archives); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	return c.waitNodesReady(ctx, time.Time{})
}

func (c *Cluster) logf(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(c.logDir, "cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// BridgeIP is the host's address on the real nodes' bridge: their Pods
// reach the host there (a manager running on the host, say).
const BridgeIP = nodeIP

// bridgesHere counts this process's clusters whose real nodes' bridge is
// up: one at most, as the host lock allows.
var bridgesHere atomic.Int32

// OnBridge reports whether a cluster of this process has real nodes, whose
// bridge holds BridgeIP. Another process's bridge does not count: it goes
// when that process's cluster stops, and an address on it with it (the
// test packages of `make test` run side by side, one with real nodes while
// another runs simulated ones).
func OnBridge() bool { return bridgesHere.Load() > 0 }

// setUpNetwork makes the bridge, the CNI configuration, and the one NAT
// rule that lets Pods reach the apiserver at the kubernetes Service's
// address (what kube-proxy would do for that Service alone): Pods' packets
// to 10.0.0.1:443 go to the apiserver on 127.0.0.1, which route_localnet on
// this bridge alone allows.
func (c *Cluster) setUpNetwork(apiPort int) error {
	br := c.host.Bridge
	for _, args := range [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", nodeIP + "/16", "dev", br},
		{"link", "set", br, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", br, "route_localnet"), []byte("1"), 0o644); err != nil {
		return err
	}
	chain, fwd := c.host.NATChain, c.host.ForwardChain
	for _, args := range [][]string{
		{"-t", "nat", "-N", chain},
		{"-t", "nat", "-A", chain, "-d", serviceClusterFirstIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("127.0.0.1:%d", apiPort)},
		{"-t", "nat", "-I", "PREROUTING", "-i", br, "-j", chain},
		// The Pods' range never leaves the machine: the bridge plugin turns
		// ip_forward on, and nothing from the bridge may be forwarded
		// elsewhere.
		{"-t", "filter", "-N", fwd},
		{"-t", "filter", "-A", fwd, "-j", "DROP"},
		{"-t", "filter", "-I", "FORWARD", "-i", br, "!", "-o", br, "-j", fwd},
	} {
		if err := run("iptables", append([]string{"-w", "5"}, args...)...); err != nil {
			return err
		}
	}
	conf := filepath.Join(c.workDir, "cni", "net.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(conf, "10-inplace.conflist"), fmt.Appendf(nil, `{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, c.netName, br, podSubnet, podGateway, filepath.Join(c.workDir, "cni", "ipam")), 0o644)
}

func (c *Cluster) startNode(ctx context.Context, p *pki, n *realNode, archives []string) error {
	for _, d := range []string{"containerd", "kubelet", "pki", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := createCgroup(n.cgroupRoot); err != nil {
		return fmt.Errorf("creating cgroup %s: %w", n.cgroupRoot, err)
	}
	n.socket = filepath.Join(n.dir, "containerd", "containerd.sock")
	config := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(n, c.opts.BinDir, filepath.Join(c.workDir, "cni", "net.d"), c.registryHosts)), 0o644); err != nil {
		return err
	}
	proc, err := startProcess(n.name+"-containerd", c.binary("containerd"), []string{"--config", config}, nil, c.logDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, proc)
	if err := proc.waitFor(ctx, "its socket", func(ctx context.Context) error { return n.ctr(ctx, "version") }); err != nil {
		return err
	}
	for _, a := range archives {
		if err := ImportImage(ctx, n.socket, a); err != nil {
			return err
		}
	}

	// The node's identity: a client certificate the Node authorizer and
	// NodeRestriction recognize.
	certPEM, keyPEM, err := p.ca.Sign(certs.Leaf{CommonName: "system:node:" + n.name, Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "pki", "kubelet.kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: c.Host, CertificateAuthorityData: p.caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"node": {ClientCertificateData: certPEM, ClientKeyData: keyPEM}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "node"}},
		CurrentContext: "local",
	}, kubeconfig); err != nil {
		return err
	}
	kubeletConfig := filepath.Join(n.dir, "kubelet", "config.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(kubeletConfiguration(n, p.caCert)), 0o644); err != nil {
		return err
	}
	n.kubeletArgs = flagArgs(map[string]string{
		"config":            kubeletConfig,
		"kubeconfig":        kubeconfig,
		"root-dir":          filepath.Join(n.dir, "kubelet", "root"),
		"cert-dir":          filepath.Join(n.dir, "kubelet", "pki"),
		"hostname-override": n.name,
		"node-ip":           nodeIP,
		"v":                 "2",
	})
	kubelet, err := startProcess(n.name+"-"+kubeletName, c.binary(kubeletName), n.kubeletArgs, nil, c.logDir)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, kubelet)
	return nil
}

func (c *Cluster) node(name string) (*realNode, error) {
	for _, n := range c.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no real node %q in this cluster (its nodes: %v)", name, c.NodeNames())
}

// kubelet is the running or stopped kubelet process of node n.
func (c *Cluster) kubelet(n *realNode) (*process, error) {
	for _, p := range c.procs {
		if p.name == n.name+"-"+kubeletName {
			return p, nil
		}
	}
	return nil, fmt.Errorf("node %s has no kubelet process", n.name)
}

// StopKubelet stops a real node's kubelet, as a node that is lost would:
// its containerd and containers go on running, nothing restarts them,
// nothing reports their status. StartKubelet brings it back.
func (c *Cluster) StopKubelet(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	p, err := c.kubelet(n)
	if err != nil {
		return err
	}
	if done, err := p.exited(); done {
		return fmt.Errorf("the kubelet of %s had already exited (%v); see %s", name, err, p.logPath) //nolint:errorlint // err is nil after an exit with status 0
	}
	p.stopped.Store(true)
	p.stop(10 * time.Second)
	return nil
}

// StartKubelet starts a node's kubelet again if StopKubelet stopped it,
// with the same configuration, and waits until that kubelet has reported
// its Node Ready (it registers the Node again if it was deleted
// meanwhile) and every other node is Ready.
func (c *Cluster) StartKubelet(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	old, err := c.kubelet(n)
	if err != nil {
		return err
	}
	if done, _ := old.exited(); !done {
		return c.waitNodesReady(ctx, time.Time{})
	}
	started := time.Now()
	kubelet, err := startProcess(old.name, old.cmd.Path, n.kubeletArgs, nil, c.logDir)
	if err != nil {
		return err
	}
	for i, p := range c.procs {
		if p == old {
			c.procs[i] = kubelet
		}
	}
	return c.waitNodesReady(ctx, started)
}

// KillContainer kills a container on a real node with SIGKILL through the
// node's containerd, as a crash would: containerID is the Pod status's
// "containerd://..." value.
func (c *Cluster) KillContainer(ctx context.Context, node, containerID string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok {
		return fmt.Errorf("container ID %q is not a containerd one", containerID)
	}
	if err := n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("killing container %s on %s: %w", id, node, err)
	}
	return nil
}

// ContainerdSockets are the addresses of the real nodes' containerds.
func (c *Cluster) ContainerdSockets() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.socket)
	}
	return out
}

// ImportImage imports an image archive into a node's containerd, given by
// its address, as the nodes' own images are: the kubelet finds it there
// and pulls nothing.
func ImportImage(ctx context.Context, socket, archive string) error {
	n := &realNode{socket: socket}
	return n.ctr(ctx, "images", "import", archive)
}

// ctr runs containerd's client against the node's own containerd, in the
// namespace of the kubelet's containers.
func (n *realNode) ctr(ctx context.Context, args ...string) error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "ctr"), append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// containerdBinaries are a real node's container runtime, built from
// containerd's Go module by make cluster-binaries (hack/containerd):
// Kubernetes 1.36 supports containerd 2 only, and a subPath of an image
// volume needs 2.2.
var containerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// containerdConfig is a containerd of one node, everything under its
// directory: the settings this machine needs are explained in
// docs/development/README.md.
func containerdConfig(n *realNode, binDir, cniConfDir, registryHosts string) string {
	d := filepath.Join(n.dir, "containerd")
	mirrors := ""
	if registryHosts != "" {
		mirrors = fmt.Sprintf(`    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %q
`, registryHosts)
	}
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.mount-handler.v1.erofs",
  "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = %[3]q

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[4]q
%[9]s
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = %[10]q
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = %[5]q
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[6]q]
      conf_dir = %[7]q
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.internal.v1.opt']
    path = %[8]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.socket, images.Pause, filepath.Join(d, "runc"), cniBinDir, cniConfDir, filepath.Join(d, "opt"), mirrors, filepath.Join(binDir, "containerd-shim-runc-v2"))
}

// kubeletConfiguration is one node's kubelet: its own ports, directories
// and cgroup root, webhook authentication and authorization against the
// cluster, the cluster's DNS, and image garbage collection off (local
// images cannot be pulled again).
func kubeletConfiguration(n *realNode, caFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
failCgroupV1: false
failSwapOn: false
podLogsDir: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]s}
authorization:
  mode: Webhook
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
serializeImagePulls: false
localStorageCapacityIsolation: false
maxPods: 250
clusterDNS: [%[7]s]
clusterDomain: %[8]s
featureGates:
  ContainerRestartRules: true
  RestartAllContainersOnContainerExits: true
`, nodeIP, n.port, n.socket, n.cgroupRoot, filepath.Join(n.dir, "pod-logs"), caFile, dnsIP, clusterDomain)
}

// waitNodesReady waits until every real node's Node is Ready and, if since
// is set, its kubelet renewed its Lease at or after since (a kubelet
// renews it as it starts). No node-lifecycle controller runs here: a Node
// whose kubelet stopped stays Ready.
func (c *Cluster) waitNodesReady(ctx context.Context, since time.Time) error {
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.CheckAlive(); err != nil {
			return false, err
		}
		var waiting []string
		for _, n := range c.nodes {
			node, err := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", n.name, err))
				continue
			}
			ready := false
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				waiting = append(waiting, n.name+" not Ready")
				continue
			}
			if !since.IsZero() {
				lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
				if err != nil || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since) {
					waiting = append(waiting, n.name+"'s Lease not renewed since its kubelet started")
				}
			}
		}
		last = strings.Join(waiting, ", ")
		return len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the real nodes to be Ready (%s; logs in %s): %w", last, c.logDir, err)
	}
	return nil
}

// stopRealNodes stops the kubelets first (so that nothing restarts a
// container), then undoes everything the nodes did to the host.
func (c *Cluster) stopRealNodes() error {
	for _, p := range c.procs {
		if strings.HasSuffix(p.name, "-"+kubeletName) {
			p.stop(10 * time.Second)
		}
	}
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, killCgroup(n.cgroupRoot))
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	errs = append(errs, c.host.restore())
	if c.ownsBridge {
		c.ownsBridge = false
		bridgesHere.Add(-1)
	}
	return errors.Join(errs...)
}

// killCgroup kills every process in root's cgroups (the containers, which
// outlive their shims otherwise) and waits until they are gone.
func killCgroup(root string) error {
	procs := func() []int {
		var pids []int
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
		return pids
	}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		left := procs()
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("processes still in cgroup %s: %v", root, procs())
	}
	return nil
}

// sweepRealNodes undoes what a dead cluster's real nodes left on the host,
// from the state it saved. The caller holds the machine-wide lock.
func sweepRealNodes(workDir string) error {
	s, err := loadHostState(filepath.Join(workDir, stateFile))
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range s.CgroupRoot {
		errs = append(errs, killCgroup(root))
	}
	return errors.Join(append(errs, s.restore())...)
}
