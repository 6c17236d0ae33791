package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/perf/bench/stats"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/webhook/certs"
)

// Admission under load: JobSets created through a real kube-apiserver,
// which calls both webhooks over TLS, by many concurrent clients, with
// admin policies installed as JobSetPolicies and one or more webhook
// replicas. The replicas are managers of the webhook role in this process,
// each with its own listener, behind a TCP proxy that hands each new
// connection to the next replica: what a Service does through kube-proxy,
// which balances connections, not requests.

// loadCell is one measurement: a number of clients, admin policies and
// webhook replicas, creates with server-side dry-run or stored.
type loadCell struct {
	Clients  int    `json:"clients"`
	Policies int    `json:"policies"`
	Replicas int    `json:"replicas"`
	Mode     string `json:"mode"`
	// Latency of every create, from the client's call to its answer.
	Latency stats.Summary `json:"latency"`
	// Throughput is creates answered per second.
	Throughput float64 `json:"throughputPerSecond"`
	// Refused are the creates not admitted, and TimedOut those of them
	// refused for a timeout (a webhook's, or the request's).
	Refused  int    `json:"refused"`
	TimedOut int    `json:"timedOut"`
	FirstErr string `json:"firstError,omitempty"`
	// Share of the API server's bytes each replica received meanwhile
	// (its requests, in effect), in percent, and the connections it
	// accepted: the API server keeps its connections to a webhook open
	// and sends many requests down each.
	Share       []float64 `json:"sharePerReplicaPercent"`
	Connections []int64   `json:"connectionsPerReplica"`
	// Cores kept busy meanwhile: by this process (the webhook replicas and
	// the clients), and by the rest of the machine (the API server and
	// etcd, mostly).
	WebhookCores float64 `json:"benchProcessCores"`
	OtherCores   float64 `json:"otherCores"`
}

// cpuNow returns the CPU time this process and the whole machine have
// used so far.
func cpuNow() (self, machine time.Duration, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	// cpu  user nice system idle iowait irq softirq steal ...: all but
	// idle and iowait are busy, in clock ticks (100 a second).
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line)
	var busy int64
	for i, f := range fields[1:] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("reading /proc/stat: %w", err)
		}
		busy += n
	}
	return self, time.Duration(busy) * 10 * time.Millisecond, nil
}

const (
	modeDryRun = "dry-run"
	modeCreate = "create"
	// policyLimit is the admin policies' restart budget: the benchmark's
	// JobSets stay under it and are admitted; the probe asks for more
	// and is refused by every policy loaded.
	policyLimit = 1000
)

type loadOptions struct {
	clients, policies, replicas []int
	modes                       []string
	requests                    int
}

// replicaProxy hands each connection it accepts to the next of the first
// active backends, in turn, and counts what each received.
type replicaProxy struct {
	l        net.Listener
	backends []string
	active   atomic.Int64
	next     atomic.Int64
	accepted []atomic.Int64
	received []atomic.Int64

	mu   sync.Mutex
	open map[net.Conn]struct{}
}

func newReplicaProxy(backends []string) (*replicaProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &replicaProxy{l: l, backends: backends, accepted: make([]atomic.Int64, len(backends)), received: make([]atomic.Int64, len(backends)), open: map[net.Conn]struct{}{}}
	p.active.Store(int64(len(backends)))
	go p.serve()
	return p, nil
}

func (p *replicaProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

// setActive serves from the first n backends from now on, and closes
// every connection open: the API server keeps its connections to a
// webhook, so without this it would go on sending to the backends it had.
func (p *replicaProxy) setActive(n int) {
	p.active.Store(int64(n))
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
	}
}

func (p *replicaProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		i := int(p.next.Add(1) % p.active.Load())
		p.accepted[i].Add(1)
		p.mu.Lock()
		p.open[in] = struct{}{}
		p.mu.Unlock()
		go func() {
			defer func() {
				in.Close()
				p.mu.Lock()
				delete(p.open, in)
				p.mu.Unlock()
			}()
			out, err := net.Dial("tcp", p.backends[i])
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst net.Conn, src io.Reader) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(out, countingReader{in, &p.received[i]})
			go pipe(in, out)
			<-done
			<-done
		}()
	}
}

// countingReader counts what is read through it as it goes: the API
// server's connections to the webhooks stay open for many requests.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// counts returns the connections each backend accepted and the bytes it
// received so far.
func (p *replicaProxy) counts() (accepted, received []int64) {
	for i := range p.backends {
		accepted, received = append(accepted, p.accepted[i].Load()), append(received, p.received[i].Load())
	}
	return accepted, received
}

// admissionLoad runs every cell of o on one API server.
func admissionLoad(ctx context.Context, root string, o loadOptions) ([]loadCell, error) {
	restCfg, c, stop, err := startAPIServer(10000)
	if err != nil {
		return nil, err
	}
	defer stop()

	// One serving certificate for every replica, as cert-manager gives
	// the replicas of a Deployment one Secret.
	certDir, err := os.MkdirTemp("", "inplace-bench-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(certDir)
	ca, err := certs.NewCA("inplace-bench-webhook-ca")
	if err != nil {
		return nil, err
	}
	crt, key, err := ca.Sign(certs.Leaf{CommonName: "127.0.0.1", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600); err != nil {
		return nil, err
	}

	const leaseNamespace = "inplace-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}); err != nil {
		return nil, err
	}
	maxReplicas := 0
	for _, r := range o.replicas {
		maxReplicas = max(maxReplicas, r)
	}
	ports, err := cluster.FreePorts(maxReplicas)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, maxReplicas)
	var backends []string
	for i := range maxReplicas {
		conf := &configv1alpha1.Configuration{}
		configv1alpha1.SetDefaults(conf)
		// As installed: the replicas elect one leader for the audit.
		conf.LeaderElection.LeaderElect = ptr.To(true)
		conf.LeaderElection.ResourceNamespace = leaseNamespace
		conf.Metrics.BindAddress, conf.Health.ProbeBindAddress = "0", "0"
		conf.Webhook.SelfSignedCerts, conf.Webhook.Hosts = false, []string{"127.0.0.1"}
		conf.Webhook.CertDir, conf.Webhook.Port = certDir, ports[i]
		if _, err := deploy.StartManager(mctx, rest.CopyConfig(restCfg), conf, managerapp.RoleWebhook, prometheus.NewRegistry(), done); err != nil {
			return nil, fmt.Errorf("webhook replica %d: %w", i, err)
		}
		backends = append(backends, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	proxy, err := newReplicaProxy(backends)
	if err != nil {
		return nil, err
	}
	defer proxy.l.Close()
	if err := deploy.RegisterWebhooks(ctx, c, proxy.port()); err != nil {
		return nil, err
	}
	if err := trustCA(ctx, c, ca.PEM); err != nil {
		return nil, err
	}
	if err := deploy.WaitForWebhooks(ctx, c, time.Minute); err != nil {
		return nil, err
	}

	template, err := readSpec(root, "inplace-story1.yaml")
	if err != nil {
		return nil, err
	}
	template.Namespace = "default"
	template.Spec.FailurePolicy.MaxRestarts = 10

	var cells []loadCell
	installed := 0
	for _, policies := range o.policies {
		for ; installed < policies; installed++ {
			if err := c.Create(ctx, loadPolicy(installed)); err != nil {
				return nil, err
			}
		}
		for ; installed > policies; installed-- {
			if err := c.Delete(ctx, loadPolicy(installed-1)); err != nil {
				return nil, err
			}
		}
		for _, replicas := range o.replicas {
			proxy.setActive(replicas)
			if err := waitForPolicies(ctx, c, template, policies, replicas); err != nil {
				return nil, err
			}
			for _, mode := range o.modes {
				for _, clients := range o.clients {
					cell, err := runCell(ctx, c, proxy, template, clients, policies, replicas, mode, max(o.requests, 4*clients))
					if err != nil {
						return nil, err
					}
					progress("admission load: %d clients, %d policies, %d replicas, %s: p50 %.0f ms, p99 %.0f ms, %.0f/s, %d refused (%d timeouts), share per replica %.0f%%",
						clients, policies, replicas, mode, cell.Latency.P50/1e3, cell.Latency.P99/1e3, cell.Throughput, cell.Refused, cell.TimedOut, cell.Share)
					cells = append(cells, cell)
				}
			}
		}
	}
	select {
	case err := <-done:
		return nil, fmt.Errorf("a webhook replica stopped: %w", err)
	default:
	}
	return cells, nil
}

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// trustCA sets the caBundle of both webhook configurations.
func trustCA(ctx context.Context, c client.Client, caPEM []byte) error {
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		return err
	}
	for i := range mutating.Items {
		m := &mutating.Items[i]
		for j := range m.Webhooks {
			m.Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, m); err != nil {
			return err
		}
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &validating); err != nil {
		return err
	}
	for i := range validating.Items {
		v := &validating.Items[i]
		for j := range v.Webhooks {
			v.Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// loadPolicy is the i-th admin policy: a restart budget every JobSet of
// the benchmark keeps, so it costs an evaluation and refuses nothing.
func loadPolicy(i int) *policyv1alpha1.JobSetPolicy {
	return &policyv1alpha1.JobSetPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("budget-%03d", i)},
		Spec: policyv1alpha1.JobSetPolicySpec{
			EnforcementAction: policyv1alpha1.Deny,
			Rego:              fmt.Sprintf(guardRego, i),
			Parameters:        &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"limit": %d}`, policyLimit)},
		},
	}
}

// waitForPolicies waits until every replica refuses a JobSet over the
// budget with exactly n violations: each has loaded the n policies.
// Asked 3 × replicas times, on new connections, so that the proxy reaches
// each replica.
func waitForPolicies(ctx context.Context, c client.Client, template *jobset.JobSet, n, replicas int) error {
	want := fmt.Sprintf("denied by %d policy violation", n)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for range 3 * replicas {
			js := template.DeepCopy()
			js.Name = "budget-probe"
			js.Spec.FailurePolicy.MaxRestarts = policyLimit + 1
			err := c.Create(ctx, js, client.DryRunAll)
			switch {
			case n == 0 && err == nil:
				continue
			case err == nil:
				last = "admitted"
				return false, nil
			case n == 0:
				last = err.Error()
				return false, nil
			case !strings.Contains(err.Error(), want):
				last = err.Error()
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d replicas to load %d policies: %w (last answer: %.300s)", replicas, n, err, last)
	}
	return nil
}

// runCell creates requests JobSets from clients goroutines.
func runCell(ctx context.Context, c client.Client, proxy *replicaProxy, template *jobset.JobSet, clients, policies, replicas int, mode string, requests int) (loadCell, error) {
	cell := loadCell{Clients: clients, Policies: policies, Replicas: replicas, Mode: mode}
	ns := "default"
	if mode == modeCreate {
		ns = fmt.Sprintf("load-%d-%d-%d", clients, policies, replicas)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return cell, err
		}
	}
	acceptedBefore, receivedBefore := proxy.counts()
	selfBefore, machineBefore, err := cpuNow()
	if err != nil {
		return cell, err
	}
	var (
		mu      sync.Mutex
		samples = make([]time.Duration, 0, requests)
		next    = make(chan int, requests)
		wg      sync.WaitGroup
	)
	for i := range requests {
		next <- i
	}
	close(next)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for i := range next {
				js := template.DeepCopy()
				js.Namespace, js.Name = ns, fmt.Sprintf("load-%05d", i)
				var opts []client.CreateOption
				if mode == modeDryRun {
					opts = append(opts, client.DryRunAll)
				}
				t0 := time.Now()
				err := c.Create(ctx, js, opts...)
				d := time.Since(t0)
				mu.Lock()
				samples = append(samples, d)
				if err != nil {
					cell.Refused++
					if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") || strings.Contains(err.Error(), "timeout") {
						cell.TimedOut++
					}
					if cell.FirstErr == "" {
						cell.FirstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	self, machine, err := cpuNow()
	if err != nil {
		return cell, err
	}
	cell.WebhookCores = (self - selfBefore).Seconds() / elapsed.Seconds()
	cell.OtherCores = max(0, (machine-machineBefore)-(self-selfBefore)).Seconds() / elapsed.Seconds()
	cell.Throughput = float64(requests) / elapsed.Seconds()
	cell.Latency = stats.Summarize(fmt.Sprintf("%d clients, %d policies, %d replicas, %s", clients, policies, replicas, mode), samples)
	accepted, received := proxy.counts()
	var total int64
	for i := range received {
		total += received[i] - receivedBefore[i]
	}
	for i := range replicas {
		cell.Connections = append(cell.Connections, accepted[i]-acceptedBefore[i])
		if total > 0 {
			cell.Share = append(cell.Share, 100*float64(received[i]-receivedBefore[i])/float64(total))
		}
	}
	if mode == modeCreate {
		// The stored JobSets go with their namespace, in the background:
		// the next cells do not wait for it.
		if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return cell, err
		}
	}
	return cell, nil
}

// loadTable prints the cells: latency percentiles in milliseconds,
// throughput, refusals, and how the API server's connections spread over
// the replicas.
func loadTable(w io.Writer, cells []loadCell) {
	fmt.Fprintln(w, "admission under load: JobSet creates through the apiserver (Story 1), both webhooks over TLS; cores busy: this process (webhooks and clients), the rest (API server, etcd)")
	fmt.Fprintf(w, "%8s %8s %8s %8s %8s %8s %8s %9s %8s %8s %9s %9s  %s\n", "clients", "policies", "replicas", "mode", "p50 ms", "p90 ms", "p99 ms", "creates/s", "refused", "timeouts", "webhooks", "the rest", "requests per replica (new connections)")
	for _, c := range cells {
		var spread []string
		for i, share := range c.Share {
			spread = append(spread, fmt.Sprintf("%.0f%% (%d)", share, c.Connections[i]))
		}
		fmt.Fprintf(w, "%8d %8d %8d %8s %8.0f %8.0f %8.0f %9.0f %8d %8d %9s %9s  %s\n", c.Clients, c.Policies, c.Replicas, c.Mode,
			c.Latency.P50/1e3, c.Latency.P90/1e3, c.Latency.P99/1e3, c.Throughput, c.Refused, c.TimedOut,
			fmt.Sprintf("%.2f", c.WebhookCores), fmt.Sprintf("%.2f", c.OtherCores), strings.Join(spread, " "))
	}
}
