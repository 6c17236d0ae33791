package restartbench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/inplace-dev/inplace/agent"
	"github.com/inplace-dev/inplace/api/protocol"
)

// Floor is this machine's time, measured in the same run, for exactly the
// API work an in-place restart of N Pods needs, done at once and with
// nothing else in between: every agent's new connection, its watch of the
// broadcast, its read of its Pod and its epoch patch; and the kubelets'
// status writes of every Pod. The Pods are copies of the JobSet's own — the
// same spec, labels, annotations and status — since the API server's cost
// of a write grows with the object written. An in-place restart adds only
// the protocol's ordering and the reactions of the cluster's controllers to
// it, so its time as a multiple of the floor says how much of the cost is
// the protocol's.
type Floor struct {
	Nodes int `json:"nodes"`
	// StatusWriteCount is how many Pod status writes (patches, as the
	// kubelet makes them) the simulated kubelets made in the in-place
	// restart, from its request count; the floor makes as many, spread
	// evenly over its Pods.
	StatusWriteCount int           `json:"statusWriteCount"`
	Agents           time.Duration `json:"agentsNanos"`
	StatusWrites     time.Duration `json:"statusWritesNanos"`
	Total            time.Duration `json:"totalNanos"`
	// PodBytes is the size of one of the Pods written, as JSON.
	PodBytes int `json:"podBytes"`
	// CPUSeconds each process used meanwhile.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// floorGate holds the floor's Pods unscheduled: no node runs them.
const floorGate = "inplace.dev/floor"

// floor measures the Floor at the env's N, on N copies of sample, a Pod of
// the in-place JobSet, that no node runs and no Job owns.
func (e *env) floor(ctx context.Context, statusWrites int, sample *corev1.Pod, timeout time.Duration) (f Floor, err error) {
	f = Floor{Nodes: e.nodes, StatusWriteCount: statusWrites}
	if raw, err := json.Marshal(sample); err == nil {
		f.PodBytes = len(raw)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "floor-"}}
	if err := e.client.Create(ctx, ns); err != nil {
		return f, err
	}
	// Gone before anything else is measured: left to the namespace
	// controller, N Pods' deletions went on for minutes into the next
	// scenario's restarts, each an event to the manager and the nodes.
	defer func() {
		if derr := e.deleteNamespace(ctx, ns.Name, timeout); derr != nil && err == nil {
			err = fmt.Errorf("deleting namespace %s: %w", ns.Name, derr)
		}
	}()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return f, err
	}
	// The broadcast of a JobSet named "floor" at epoch 1, for the agents'
	// transport to watch.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName("floor"), Namespace: ns.Name},
		Data: protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: 1})}
	if err := e.client.Create(ctx, cm); err != nil {
		return f, err
	}
	names := make([]string, e.nodes)
	uids := make([]types.UID, e.nodes)
	if err := parallel(ctx, e.nodes, 50, func(ctx context.Context, i int) error {
		names[i] = "floor-" + strconv.Itoa(i)
		pod := floorPod(sample, ns.Name, names[i])
		status := pod.Status
		created, err := e.cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = status
		if _, err := e.cs.CoreV1().Pods(ns.Name).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		uids[i] = created.UID
		return nil
	}); err != nil {
		return f, fmt.Errorf("creating the floor's Pods: %w", err)
	}
	tr, err := e.cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return f, err
	}
	if err := grantAgentRights(ctx, e.cs, ns.Name); err != nil {
		return f, err
	}
	worker := sample.Spec.Containers[0].Name

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	cpuBefore := e.cpu.snapshot()
	start := time.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.Now()
		err := parallel(ctx, e.nodes, e.nodes, func(ctx context.Context, i int) error {
			return agentWork(ctx, e.admin, tr.Status.Token, ns.Name, names[i], "floor")
		})
		f.Agents = time.Since(t)
		errs <- err
	}()
	go func() {
		defer wg.Done()
		t := time.Now()
		// Each Pod's writes come from a node of its own, as the
		// restart's do.
		kubelets := newKubeletClients(e.admin)
		err := parallel(ctx, e.nodes, e.nodes, func(ctx context.Context, i int) error {
			// As the simulated kubelet: a strategic merge patch of the
			// worker's container status per write, with the Pod's UID as
			// precondition, tried again until it is written (at N = 5,000
			// a write may be refused or time out).
			writes := statusWrites / e.nodes
			if i < statusWrites%e.nodes {
				writes++
			}
			for w := range writes {
				patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"containerStatuses":[{"name":%q,"restartCount":%d,"state":{"running":{"startedAt":%q}}}]}}`,
					uids[i], worker, w+1, time.Now().UTC().Format(time.RFC3339))
				if err := agent.Retry(ctx, func(ctx context.Context) error {
					_, err := kubelets.node(fmt.Sprintf("floor-%d", i)).Pods(ns.Name).Patch(ctx, names[i], types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
					return err
				}, nil); err != nil {
					return err
				}
			}
			return nil
		})
		f.StatusWrites = time.Since(t)
		errs <- err
	}()
	wg.Wait()
	f.Total = time.Since(start)
	f.CPUSeconds = e.cpu.since(cpuBefore)
	close(errs)
	for err := range errs {
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// floorPod copies a JobSet's Pod into the floor's namespace: the same spec,
// labels, annotations and status, held unscheduled, owned by nothing and
// without the Job controller's labels, so that no controller acts on it.
func floorPod(sample *corev1.Pod, namespace, name string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: maps.Clone(sample.Labels), Annotations: maps.Clone(sample.Annotations)},
		Spec:   *sample.Spec.DeepCopy(),
		Status: *sample.Status.DeepCopy(),
	}
	for key := range pod.Labels {
		if strings.HasPrefix(key, "batch.kubernetes.io/") || key == "job-name" || key == "controller-uid" {
			delete(pod.Labels, key)
		}
	}
	pod.Spec.NodeName = ""
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: floorGate})
	return pod
}

// agentWork is what one agent does against the API server after its Pod
// restarts in place, with the agent's own transport and retries: a new
// connection, a watch of the broadcast (one request, from the watch
// cache), a read of its Pod and the patch of its epoch.
func agentWork(ctx context.Context, admin *rest.Config, token, namespace, pod, jobSet string) error {
	cfg := agent.ClientConfig(rest.AnonymousClientConfig(admin))
	cfg.BearerToken = token
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	defer utilnet.CloseIdleConnectionsFor(rt)
	cs, err := kubernetes.NewForConfigAndClient(cfg, &http.Client{Transport: rt})
	if err != nil {
		return err
	}
	ctx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	t := &agent.KubeTransport{Client: cs, Namespace: namespace, Pod: pod, JobSet: jobSet, Log: logr.Discard()}
	broadcasts, err := t.Broadcasts(ctx)
	if err != nil {
		return err
	}
	select {
	case <-broadcasts:
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, _, err := t.Self(ctx); err != nil {
		return err
	}
	// Retried as the agent retries its report.
	return agent.Retry(ctx, func(ctx context.Context) error { return t.ReportEpoch(ctx, 2) }, nil)
}

// parallel runs f for 0..n-1 with at most width at once; the first error
// wins.
func parallel(ctx context.Context, n, width int, f func(context.Context, int) error) error {
	sem := make(chan struct{}, max(width, 1))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

// grantAgentRights gives the namespace's default service account what the
// controller grants the agents.
func grantAgentRights(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "floor-agent", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
		},
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "floor-agent", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: namespace}},
	}
	_, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{})
	return err
}
