package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/inplace-dev/inplace/test/images"
)

// FeatureGates are the gates every component runs with: container restart
// rules and RestartAllContainers, on by default in 1.36 but pinned here so
// that the cluster does not silently drop restartPolicyRules.
const FeatureGates = "ContainerRestartRules=true,RestartAllContainersOnContainerExits=true"

// Controllers are the kube-controller-manager controllers the cluster runs.
// Node lifecycle is absent on purpose: simulated nodes report their own
// health, and a node-lifecycle controller would taint them otherwise.
var Controllers = []string{
	"job-controller",
	// The manager installed as docs/how-to/install.md says is a Deployment.
	"deployment-controller",
	"replicaset-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"ttl-after-finished-controller",
	"endpointslice-controller",
	"pod-garbage-collector-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	// JobSets' volumeClaimPolicies: claims bind to volumes, and neither
	// goes while in use.
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
}

const (
	serviceClusterIPRange = "10.0.0.0/24"
	serviceClusterFirstIP = "10.0.0.1"
	workDirPrefix         = "inplace-cluster-"
)

// Options configure a local cluster. The zero value is usable.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler. Defaults to $INPLACE_BIN_DIR, then <repo>/bin.
	BinDir string

	// ArtifactsDir receives the component logs when Stop is asked to keep
	// them. Defaults to $ARTIFACTS, then <repo>/.local/artifacts.
	ArtifactsDir string

	// Name labels the artifacts directory; defaults to "cluster".
	Name string

	// APIServerFlags are extra or overriding kube-apiserver flags, without
	// the leading dashes.
	APIServerFlags map[string]string

	// ControllerManagerClient and SchedulerClient are the client rate
	// limits of the controller manager and the scheduler. Each defaults to
	// 1000 requests per second with bursts of 2000: enough for thousands
	// of Pods, far above the components' own defaults
	// (ControllerManagerClientDefault, SchedulerClientDefault).
	ControllerManagerClient, SchedulerClient ClientRate

	// ConcurrentJobSyncs is how many Jobs the Job controller syncs at once.
	// Defaults to 20 (the controller manager's own default is 5).
	ConcurrentJobSyncs int

	// StartTimeout bounds the whole start. Defaults to 90s, and 5 minutes
	// with real nodes (their images are built first).
	StartTimeout time.Duration

	// RealNodes is how many real nodes to start: a kubelet and a containerd
	// each, on a bridge of their own (needs root and 'make node-deps').
	RealNodes int

	// ImageArchives are the images every real node imports; nil builds the
	// project's (package test/images).
	ImageArchives []string

	// ExtraImageArchives are imported besides ImageArchives (the PyTorch
	// example's image, say).
	ExtraImageArchives []string

	// Registry starts an image registry beside the control plane (CNCF
	// Distribution, built by 'make cluster-binaries'), at Cluster.Registry:
	// images pushed there reach the real nodes the way a cluster's images
	// reach its nodes, by a pull.
	Registry bool
}

// ClientRate is a client's rate limit: QPS requests per second on average,
// Burst at once.
type ClientRate struct {
	QPS, Burst int
}

// ControllerManagerClientDefault and SchedulerClientDefault are the
// controller manager's and the scheduler's own defaults (--kube-api-qps/--kube-api-burst; KubeSchedulerConfiguration's
// clientConnection), what a cluster that does not tune them runs.
var (
	ControllerManagerClientDefault = ClientRate{QPS: 20, Burst: 30}
	SchedulerClientDefault         = ClientRate{QPS: 50, Burst: 100}
)

// Cluster is a running local control plane.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig for this cluster.
	Kubeconfig string
	// Config is an admin REST config for this cluster.
	Config *rest.Config
	// Host is the apiserver URL.
	Host string
	// Registry is the image registry's host:port (Options.Registry), on a
	// loopback address: plain HTTP, which containerd allows there without
	// configuration. Empty without one.
	Registry string

	opts    Options
	workDir string
	// registryHosts is containerd's hosts configuration that mirrors
	// MirroredRegistries to Registry; empty without a registry.
	registryHosts string
	logDir        string
	procs         []*process // in start order
	nodes         []*realNode
	netName       string // the CNI network of the real nodes
	// ownsBridge: the real nodes' bridge is up, counted in bridgesHere.
	ownsBridge bool
	host       *HostState // before the real nodes started
	hostLock   *os.File
	// leftOnHost is what Stop found the real nodes left on the host.
	leftOnHost []string
	stopOnce   sync.Once
	stopErr    error
	artifacts  string
}

// Start brings up etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler and returns once the apiserver is ready and both managers
// report healthy. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if opts.RealNodes > 0 {
		if err := checkRealNodePrerequisites(opts.BinDir); err != nil {
			return nil, err
		}
	}
	_ = sweepStaleWorkDirs(false) // best effort: directories of dead clusters
	workDir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", workDirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, workDir: workDir, logDir: filepath.Join(workDir, "logs")}
	defer func() {
		if err != nil {
			if c.Stop(true) == nil && c.artifacts != "" {
				err = fmt.Errorf("%w (component logs kept in %s)", err, c.artifacts)
			}
		}
	}()
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, err
	}
	if opts.RealNodes > 0 {
		// The images first, then the machine-wide lock: building them
		// takes a while, and another cluster may hold the lock meanwhile.
		if c.opts.ImageArchives == nil {
			root, err := RepoRoot()
			if err != nil {
				return nil, err
			}
			start := time.Now()
			if c.opts.ImageArchives, err = images.Build(ctx, root, filepath.Join(workDir, "images")); err != nil {
				return nil, err
			}
			c.logf("built the images in %v", time.Since(start).Round(time.Millisecond))
		}
		c.opts.ImageArchives = slices.Concat(c.opts.ImageArchives, c.opts.ExtraImageArchives)
		if c.hostLock, err = lockHost(ctx); err != nil {
			return nil, err
		}
		// Holding the lock: every other real-node cluster's directory is a
		// dead one's, and what it left is undone now.
		if err := sweepStaleWorkDirs(true); err != nil {
			return nil, fmt.Errorf("undoing what a crashed real-node cluster left on this host (see docs/development/README.md): %w", err)
		}
		if c.host, err = recordHost(); err != nil {
			return nil, fmt.Errorf("recording the host's state: %w", err)
		}
	}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	certs, err := newPKI(filepath.Join(workDir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("creating certificates: %w", err)
	}
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4] // ports[5]: the registry's

	// The registry first: it depends on nothing, and its port is bound
	// before the others' starts give another process time to take it.
	if opts.Registry {
		if err := c.startRegistry(ctx, ports[5]); err != nil {
			return nil, err
		}
	}
	if err := c.startEtcd(ctx, etcdPort, peerPort); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, certs, apiPort, etcdPort); err != nil {
		return nil, err
	}
	if err := c.startControllerManager(ctx, certs, kcmPort); err != nil {
		return nil, err
	}
	if err := c.startScheduler(ctx, schedPort); err != nil {
		return nil, err
	}
	if opts.RealNodes > 0 {
		if err := c.startRealNodes(ctx, certs, apiPort); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (o *Options) complete() error {
	var err error
	if o.BinDir == "" {
		if o.BinDir, err = BinDir(); err != nil {
			return err
		}
	}
	if o.ArtifactsDir == "" {
		o.ArtifactsDir = os.Getenv("ARTIFACTS")
	}
	if o.ArtifactsDir == "" {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		o.ArtifactsDir = filepath.Join(root, ".local", "artifacts")
	}
	if o.Name == "" {
		o.Name = "cluster"
	}
	for _, r := range []*ClientRate{&o.ControllerManagerClient, &o.SchedulerClient} {
		if r.QPS == 0 {
			*r = ClientRate{QPS: 1000, Burst: 2000}
		}
	}
	if o.ConcurrentJobSyncs == 0 {
		o.ConcurrentJobSyncs = 20
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
		if o.RealNodes > 0 {
			o.StartTimeout = 5 * time.Minute
		}
	}
	return nil
}

// BinDir is where the control plane binaries are: $INPLACE_BIN_DIR, or
// <repo>/bin.
func BinDir() (string, error) {
	if dir := os.Getenv("INPLACE_BIN_DIR"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot finds the repository root: the nearest directory upwards from the
// working directory holding the project's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/inplace-dev/inplace\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the inplace repository root above the working directory; set INPLACE_BIN_DIR and ARTIFACTS")
		}
		dir = parent
	}
}

func (c *Cluster) binary(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) start(name string, args []string) (*process, error) {
	p, err := startProcess(name, c.binary(name), args, nil, c.logDir)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *Cluster) startEtcd(ctx context.Context, port, peerPort int) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", port)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := c.start("etcd", []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.workDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		// A throwaway cluster: durability buys nothing and fsync costs a lot.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	return p.waitFor(ctx, "health", etcdHealthy(client))
}

// etcdHealthy checks etcd's health at its client URL, each check bounded.
func etcdHealthy(url string) func(context.Context) error {
	return httpOK(&http.Client{Timeout: 5 * time.Second}, url+"/health")
}

// apiServerReady checks the API server's /readyz, each check bounded, so
// that one stalled request cannot outlast the process it waits for.
func (c *Cluster) apiServerReady() (func(context.Context) error, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}, nil
}

func (c *Cluster) startAPIServer(ctx context.Context, certs *pki, port, etcdPort int) error {
	flags := map[string]string{
		"etcd-servers":                     fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"bind-address":                     "127.0.0.1",
		"advertise-address":                "127.0.0.1",
		"secure-port":                      strconv.Itoa(port),
		"tls-cert-file":                    certs.servingCert,
		"tls-private-key-file":             certs.servKey,
		"client-ca-file":                   certs.caCert,
		"authorization-mode":               "RBAC",
		"service-account-key-file":         certs.saPublic,
		"service-account-signing-key-file": certs.saPrivate,
		"service-account-issuer":           "https://kubernetes.default.svc",
		"api-audiences":                    "https://kubernetes.default.svc",
		"service-cluster-ip-range":         serviceClusterIPRange,
		"allow-privileged":                 "true",
		"feature-gates":                    FeatureGates,
		// No node-lifecycle controller removes the not-ready taint that this
		// plugin adds to new Nodes; simulated nodes manage their own taints.
		"disable-admission-plugins":      "TaintNodesByCondition",
		"enable-priority-and-fairness":   "false",
		"max-requests-inflight":          "3000",
		"max-mutating-requests-inflight": "1000",
		"cert-dir":                       filepath.Join(c.workDir, "apiserver"),
		"v":                              "1",
	}
	if c.opts.RealNodes > 0 {
		// Real kubelets: node identities, and the apiserver reaching them
		// (logs, exec) at their InternalIP with a client certificate.
		flags["authorization-mode"] = "Node,RBAC"
		flags["enable-admission-plugins"] = "NodeRestriction"
		flags["kubelet-client-certificate"] = certs.adminCert
		flags["kubelet-client-key"] = certs.adminKey
		flags["kubelet-preferred-address-types"] = "InternalIP"
		// No kube-proxy runs: the apiserver reaches a Service (the
		// webhooks of an installed manager) at its endpoints' Pod IPs,
		// which the host routes to the nodes' bridge.
		flags["enable-aggregator-routing"] = "true"
	}
	for k, v := range c.opts.APIServerFlags {
		flags[k] = v
	}
	p, err := c.start("kube-apiserver", flagArgs(flags))
	if err != nil {
		return err
	}

	c.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.Kubeconfig = filepath.Join(c.workDir, "admin.kubeconfig")
	kubeconfig := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"local": {Server: c.Host, CertificateAuthorityData: certs.caPEM}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"admin": {
			ClientCertificateData: certs.adminCertPEM, ClientKeyData: certs.adminKeyPEM,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"local": {Cluster: "local", AuthInfo: "admin"}},
		CurrentContext: "local",
	}
	if err := clientcmd.WriteToFile(kubeconfig, c.Kubeconfig); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 1000, 2000
	ready, err := c.apiServerReady()
	if err != nil {
		return err
	}
	return p.waitFor(ctx, "readyz", ready)
}

func (c *Cluster) startControllerManager(ctx context.Context, certs *pki, port int) error {
	p, err := c.start("kube-controller-manager", flagArgs(map[string]string{
		"kubeconfig":                       c.Kubeconfig,
		"authentication-kubeconfig":        c.Kubeconfig,
		"authorization-kubeconfig":         c.Kubeconfig,
		"bind-address":                     "127.0.0.1",
		"secure-port":                      strconv.Itoa(port),
		"cert-dir":                         filepath.Join(c.workDir, "kube-controller-manager"),
		"controllers":                      strings.Join(Controllers, ","),
		"use-service-account-credentials":  "true",
		"service-account-private-key-file": certs.saPrivate,
		"root-ca-file":                     certs.caCert,
		"kube-api-qps":                     strconv.Itoa(c.opts.ControllerManagerClient.QPS),
		"kube-api-burst":                   strconv.Itoa(c.opts.ControllerManagerClient.Burst),
		"concurrent-job-syncs":             strconv.Itoa(c.opts.ConcurrentJobSyncs),
		"leader-elect":                     "false",
		"feature-gates":                    FeatureGates,
	}))
	if err != nil {
		return err
	}
	return p.waitFor(ctx, "healthz", httpOK(insecureClient, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
}

func (c *Cluster) startScheduler(ctx context.Context, port int) error {
	config := filepath.Join(c.workDir, "kube-scheduler.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, c.Kubeconfig, c.opts.SchedulerClient.QPS, c.opts.SchedulerClient.Burst), 0o600); err != nil {
		return err
	}
	p, err := c.start("kube-scheduler", flagArgs(map[string]string{
		"config":                    config,
		"authentication-kubeconfig": c.Kubeconfig,
		"authorization-kubeconfig":  c.Kubeconfig,
		"bind-address":              "127.0.0.1",
		"secure-port":               strconv.Itoa(port),
		"cert-dir":                  filepath.Join(c.workDir, "kube-scheduler"),
		"feature-gates":             FeatureGates,
	}))
	if err != nil {
		return err
	}
	return p.waitFor(ctx, "healthz", httpOK(insecureClient, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
}

// Stop stops every component, newest first, and removes the working
// directory. With keepLogs the component logs are first copied to
// <ArtifactsDir>/<Name>-<time>, whose path LogsDir then returns. Stop is
// safe to call more than once.
func (c *Cluster) Stop(keepLogs bool) error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.host != nil {
			errs = append(errs, c.stopRealNodes())
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].stop(10 * time.Second)
		}
		if c.host != nil {
			// Checked while the machine-wide lock is still held: another
			// cluster's nodes start only after it.
			c.leftOnHost = c.host.Differences()
		}
		if keepLogs {
			dst := filepath.Join(c.opts.ArtifactsDir, fmt.Sprintf("%s-%s", c.opts.Name, time.Now().Format("20060102-150405.000")))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				errs = append(errs, err)
			} else if err := os.Rename(c.logDir, dst); err != nil {
				errs = append(errs, fmt.Errorf("keeping logs: %w", err))
			} else {
				c.artifacts = dst
			}
		}
		if m := mountsUnder(c.workDir); len(m) > 0 {
			// Never remove through a mount: the directory and its recorded
			// state stay for the next start's sweep.
			errs = append(errs, fmt.Errorf("kept %s: still mounted there: %v", c.workDir, m))
		} else {
			errs = append(errs, os.RemoveAll(c.workDir))
		}
		if c.hostLock != nil {
			errs = append(errs, c.hostLock.Close())
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// LogsDir is where the component logs were kept by Stop(true), or the live
// log directory while the cluster runs.
func (c *Cluster) LogsDir() string {
	if c.artifacts != "" {
		return c.artifacts
	}
	return c.logDir
}

// CheckAlive returns an error naming every component that has exited.
func (c *Cluster) CheckAlive() error {
	var errs []error
	for _, p := range c.procs {
		if done, err := p.exited(); done && !p.stopped.Load() {
			// err is nil when the process exited with status 0: %v prints
			// that, %w would not.
			errs = append(errs, fmt.Errorf("%s exited: %v; see %s", p.name, err, p.logPath)) //nolint:errorlint // see above

		}
	}
	return errors.Join(errs...)
}

// PIDs maps each running component's name (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) to its process ID, for
// measurements of their resource use.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// Done is closed when any component exits.
func (c *Cluster) Done() <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	for _, p := range c.procs {
		go func() {
			<-p.done
			if !p.stopped.Load() {
				once.Do(func() { close(done) })
			}
		}()
	}
	return done
}

// LeftOnHost lists what the real nodes left on the host after Stop, checked
// against the state recorded before they started: empty when the host is as
// it was.
func (c *Cluster) LeftOnHost() []string { return c.leftOnHost }

// sweepStaleWorkDirs removes the working directories of clusters whose
// process no longer exists (killed by a test timeout, say). Those of
// real-node clusters are undone and removed only by a caller that holds
// the machine-wide lock (withRealNodes): undoing them races a live
// real-node cluster otherwise.
func sweepStaleWorkDirs(withRealNodes bool) error {
	var errs []error
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range matches {
		rest := strings.TrimPrefix(filepath.Base(dir), workDirPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil {
			continue
		}
		_, stateErr := os.Stat(filepath.Join(dir, stateFile))
		realNodes := stateErr == nil
		if realNodes {
			// Only the holder of the lock touches real-node directories,
			// and for it every other one is a dead cluster's, whatever its
			// PID now names.
			if !withRealNodes {
				continue
			}
			if err := sweepRealNodes(dir); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", dir, err))
				continue
			}
			if m := mountsUnder(dir); len(m) > 0 {
				errs = append(errs, fmt.Errorf("%s: still mounted: %v", dir, m))
				continue // never removed through a mount
			}
			os.RemoveAll(dir)
			continue
		}
		if pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue
		}
		os.RemoveAll(dir)
	}
	return errors.Join(errs...)
}

var insecureClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // local health probe of a self-signed component
}

func httpOK(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func flagArgs(flags map[string]string) []string {
	args := make([]string, 0, len(flags))
	for k, v := range flags {
		args = append(args, "--"+k+"="+v)
	}
	sort.Strings(args)
	return args
}

// Restart kills a control-plane component (etcd or kube-apiserver) with
// SIGKILL, as a crash would, runs whileDown (if not nil) while it is
// away, starts it again with the same flags and returns once it serves
// again: etcd's data and the API server's certificates stay. Clients
// reconnect on their own. down is how long the component was away.
//
// Like StartKubelet, Restart must not run concurrently with Stop or with
// another restart; channels from Done and the PIDs taken before it do not
// follow the new process.
func (c *Cluster) Restart(ctx context.Context, name string, whileDown func(context.Context) error) (down time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var old *process
	for _, p := range c.procs {
		if done, _ := p.exited(); p.name == name && !done {
			old = p
		}
	}
	if old == nil {
		return 0, fmt.Errorf("no running %s to restart", name)
	}
	var ready func(context.Context) error
	switch name {
	case "etcd":
		ready = etcdHealthy(flagValue(old.cmd.Args, "listen-client-urls"))
	case "kube-apiserver":
		if ready, err = c.apiServerReady(); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("%s cannot be restarted: etcd or kube-apiserver only", name)
	}
	killed := time.Now()
	old.stopped.Store(true)
	_ = old.cmd.Process.Kill()
	<-old.done
	// Started again whatever whileDown says: the next test needs it.
	var downErr error
	if whileDown != nil {
		if downErr = whileDown(ctx); downErr != nil {
			downErr = fmt.Errorf("while %s was away: %w", name, downErr)
		}
	}
	p, err := startProcess(name, old.cmd.Path, old.cmd.Args[1:], old.env, c.logDir)
	if err != nil {
		old.stopped.Store(false) // CheckAlive reports it gone
		return 0, errors.Join(downErr, err)
	}
	for i := range c.procs {
		if c.procs[i] == old {
			c.procs[i] = p
		}
	}
	if err := p.waitFor(ctx, "serving again", ready); err != nil {
		return 0, errors.Join(downErr, err)
	}
	return time.Since(killed), downErr
}

// flagValue is the value of --name=value in args, "" without it.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}
