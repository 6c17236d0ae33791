package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/perf/restartbench"
	"github.com/inplace-dev/inplace/test/cluster"
)

// buildManager builds inplace-manager, as its image holds it, into dir.
func buildManager(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "inplace-manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building inplace-manager: %w: %s", err, out)
	}
	return bin, nil
}

// manager is one inplace-manager process: one Deployment's container.
type manager struct {
	role    string
	cmd     *exec.Cmd
	metrics string // its metrics endpoint's URL
	logPath string
	// exited is closed once the process has exited, with its error in
	// exitErr.
	exited  chan struct{}
	exitErr error
}

// startManager runs the binary in role (controller or webhook) as its
// service account's client cfg, with conf written as its configuration
// file, its metrics served on a port of this host, its log in dir.
func startManager(ctx context.Context, bin, dir, role string, cfg *rest.Config, conf *configv1alpha1.Configuration) (*manager, error) {
	ports, err := cluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	c := *conf
	c.APIVersion, c.Kind = configv1alpha1.APIVersion, configv1alpha1.Kind
	c.Metrics.BindAddress, c.Metrics.Secure = fmt.Sprintf("127.0.0.1:%d", ports[0]), ptr.To(false)
	c.Health.ProbeBindAddress = "0"
	c.LeaderElection.LeaderElect = ptr.To(false)
	data, err := yaml.Marshal(&c)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, role+"-config.yaml")
	if err := os.WriteFile(confPath, data, 0o600); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, role+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, role+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", confPath, "--role", role)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE=inplace-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	m := &manager{role: role, cmd: cmd, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]), logPath: logPath, exited: make(chan struct{})}
	go func() {
		m.exitErr = cmd.Wait()
		logFile.Close()
		close(m.exited)
	}()
	return m, nil
}

// alive is an error once the process has exited: what it measures and
// serves ends with it.
func (m *manager) alive() error {
	select {
	case <-m.exited:
		return fmt.Errorf("inplace-manager --role=%s exited (%w): its log is %s", m.role, m.exitErr, m.logPath)
	default:
		return nil
	}
}

// stop ends the process and waits for it.
func (m *manager) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// usage is what a process and its children (the admission server's policy
// evaluators) used so far: the peak resident memory of each, and their
// CPU time.
type usage struct {
	// PeakRSS is the process's own peak resident memory (VmHWM).
	PeakRSS int64 `json:"peakRSSBytes"`
	// ChildrenPeakRSS is the sum of its live children's peaks: with
	// PeakRSS, a bound on what its container held at once.
	ChildrenPeakRSS int64 `json:"childrenPeakRSSBytes"`
	// CPUSeconds is the process's CPU time, its children's included (the
	// live ones', and those it has waited for).
	CPUSeconds float64 `json:"cpuSeconds"`
}

// usage reads the process's and its children's usage from /proc. A
// process that exited measured nothing of the rest of the row: an error,
// with its log's place.
func (m *manager) usage() (usage, error) {
	if err := m.alive(); err != nil {
		return usage{}, err
	}
	pid := m.cmd.Process.Pid
	own, err := readProc(pid, true)
	if err != nil {
		return usage{}, fmt.Errorf("%s: %w", m.role, err)
	}
	u := usage{PeakRSS: own.peak, CPUSeconds: own.cpu}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return u, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(child, false)
		if err != nil || p.ppid != pid {
			continue // not a child, or gone meanwhile
		}
		u.ChildrenPeakRSS += p.peak
		u.CPUSeconds += p.cpu
	}
	return u, nil
}

// procUsage is one process's parent, peak resident memory and CPU time.
type procUsage struct {
	ppid int
	peak int64
	cpu  float64
}

// readProc reads /proc/PID/stat and status: the CPU time is utime and
// stime, with waited-for children's (cutime, cstime) if reaped.
func readProc(pid int, reaped bool) (procUsage, error) {
	st, err := restartbench.ReadProcStat(pid)
	if err != nil {
		return procUsage{}, err
	}
	p := procUsage{ppid: st.PPID, cpu: st.CPU.Seconds()}
	if reaped {
		p.cpu += st.ReapedChild.Seconds()
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return p, fmt.Errorf("VmHWM of %d: %w", pid, err)
			}
			p.peak = kb * 1024
		}
	}
	return p, nil
}

// gauge reads one metric of the process's metrics endpoint: the sum of its
// series, and whether it has any.
func (m *manager) gauge(ctx context.Context, name string) (float64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.metrics, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, false, err
	}
	f, ok := families[name]
	if !ok {
		return 0, false, nil
	}
	var sum float64
	for _, metric := range f.GetMetric() {
		sum += metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
	}
	return sum, true, nil
}

// writeKubeconfig writes cfg, a bearer token's client configuration, as a
// kubeconfig file.
func writeKubeconfig(path string, cfg *rest.Config) error {
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "sa"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}
