package restartbench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/inplace-dev/inplace/agent"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/controller"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/simnode"
)

// Floor is the least an in-place restart of N Pods costs the API server,
// measured in the same run on the same cluster: only the requests such a
// restart cannot do without, each admitted once, all at once, with nothing
// else in between — no controller orders them, no container restarts.
// They are, from first principles (Needed):
//
//   - each agent, a new process: a new connection (a TLS handshake), a
//     watch of the broadcast (which delivers its current state), and the
//     patch of its Pod's epoch, with a token bound to its Pod, through the
//     agents' admission policy;
//   - each kubelet: two status writes of its Pod, its containers restarted
//     and not ready, then running and ready again;
//   - the controller: two writes of the broadcast, the epoch deprecated and
//     then the next one synced once every epoch is written, which every
//     agent's watch delivers (its two JobSet status writes are left out:
//     the floor has no JobSet).
//
// The same API Priority and Fairness settings apply: the agents'
// requests are their service account's, the status writes their node's and
// the broadcast's writes the manager's. All are sent at once, as a
// restart's are, so the floor's time includes the priority levels' queues.
// Requests refused (429) are tried again as the agents and kubelets do, and
// the figure counts them (Requests, Rejected). The Pods are copies of the
// JobSet's own — same spec, labels, annotations and status, about 11 KB —
// bound to the simulated nodes, which leave them alone: the API server's
// cost of a write grows with the object written. The controller's cache does
// not select them (it would react to them), so the floor lacks the N watch
// events per round a restart sends the controller.
//
// An in-place restart's time and control-plane CPU as multiples of the
// floor's say how much its protocol and the cluster's reactions add to the
// work itself.
//
// The floor of kind FloorKubelet is the same, but with the status writes a
// kubelet makes (kubeletRestart, one after the other, as its status
// manager sends them) instead of the two it needs: those the kubelet's
// restart of all containers and the agent's startup probe bring about,
// whatever the agents and the controller do. In place as a multiple of it
// is what the restart adds to its own least requests and the kubelet's
// writes: ordering, retries, the JobSet's status writes and Events, the
// controller's watch events.
type Floor struct {
	Nodes int `json:"nodes"`
	// Kind is FloorNeeded or FloorKubelet.
	Kind string `json:"kind"`
	// StatusWritesPerPod is the number of status writes of each Pod.
	StatusWritesPerPod int `json:"statusWritesPerPod"`
	// Needed are the requests the floor is made of, by actor and "verb
	// resource".
	Needed map[string]map[string]int `json:"needed"`
	// Requests are the requests sent, by actor and "verb resource": Needed
	// and every retry of a refused or failed one.
	Requests map[string]map[string]int `json:"requests"`
	// Rejected are the requests API Priority and Fairness turned away, by
	// priority level.
	Rejected map[string]float64 `json:"rejectedRequests,omitempty"`
	// Handshakes are the agents' new connections.
	Handshakes  int     `json:"handshakes"`
	WatchEvents float64 `json:"watchEvents"`
	// PodChanges are the changes of the floor's Pods a watcher of them
	// received, one per write that changed its Pod; counted only with
	// Config.CountPodChanges (0 otherwise), since that watch adds its
	// events to the floor's cost.
	PodChanges int `json:"podChanges,omitempty"`
	// Agents: until every agent's epoch patch returned; StatusWrites: every
	// kubelet's last status write; Total: every agent has seen, on its
	// watch, the controller's second broadcast write, made after both.
	Agents       time.Duration `json:"agentsNanos"`
	StatusWrites time.Duration `json:"statusWritesNanos"`
	Total        time.Duration `json:"totalNanos"`
	// PodBytes is the size of one of the Pods written, as JSON.
	PodBytes int `json:"podBytes"`
	// CPUSeconds each process used meanwhile.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// floorJobSet names the JobSet whose broadcast the floor's agents watch.
const floorJobSet = "floor"

// The kinds of floor.
const (
	// FloorNeeded: the status writes a kubelet cannot do without.
	FloorNeeded = "needed"
	// FloorKubelet: the status writes a kubelet makes.
	FloorKubelet = "kubelet"
)

// FloorKinds are the kinds of floor, in the order they are measured.
var FloorKinds = []string{FloorNeeded, FloorKubelet}

// floorNeeded are the requests of a floor at n Pods, with writes status
// writes per Pod.
func floorNeeded(n, writes int) map[string]map[string]int {
	return map[string]map[string]int{
		ActorAgents:     {"watch configmaps": n, "patch pods": n},
		ActorKubelets:   {"patch pods/status": writes * n},
		ActorController: {"update configmaps": 2},
	}
}

// floor measures the Floor of a kind at the env's N, on N copies of
// sample, a Pod of the in-place JobSet, bound to the simulated nodes that
// leave them alone.
func (e *env) floor(ctx context.Context, kind string, sample *corev1.Pod, timeout time.Duration, countChanges bool) (f Floor, err error) {
	steps, err := statusWrites(kind)
	if err != nil {
		return f, err
	}
	// One Pod's writes serve every copy: the Pods differ only in their
	// UIDs, which the writes name as their precondition.
	writes, err := restartPatches(sample, steps, time.Now())
	if err != nil {
		return f, err
	}
	f = Floor{Nodes: e.nodes, Kind: kind, StatusWritesPerPod: len(writes), Needed: floorNeeded(e.nodes, len(writes))}
	if raw, err := json.Marshal(sample); err == nil {
		f.PodBytes = len(raw)
	}
	epoch := 1
	if v, err := protocol.ParseEpoch(sample.Annotations[jobset.EpochKey]); err == nil {
		epoch = int(v) + 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "floor-"}}
	if err := e.client.Create(ctx, ns); err != nil {
		return f, err
	}
	// Gone before anything else is measured: left to the namespace
	// controller, N Pods' deletions went on for minutes into the next
	// scenario's restarts.
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
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName(floorJobSet), Namespace: ns.Name},
		Data: protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: int32(epoch - 1)})}
	if err := e.client.Create(ctx, cm); err != nil {
		return f, err
	}
	if err := grantAgentRights(ctx, e.cs, ns.Name); err != nil {
		return f, err
	}
	names := make([]string, e.nodes)
	uids := make([]types.UID, e.nodes)
	tokens := make([]string, e.nodes)
	if err := parallel(ctx, e.nodes, 50, func(ctx context.Context, i int) error {
		names[i] = "floor-" + strconv.Itoa(i)
		pod := floorPod(sample, ns.Name, names[i], fmt.Sprintf("%s-%d", simNodePrefix, i))
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
		// As the kubelet projects it: bound to the Pod, and so to its node.
		tr, err := e.cs.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "default", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: names[i], UID: created.UID,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		tokens[i] = tr.Status.Token
		return nil
	}); err != nil {
		return f, fmt.Errorf("creating the floor's Pods: %w", err)
	}
	if err := e.agentPolicyApplies(ctx, ns.Name, names[0], uids[0], tokens[0]); err != nil {
		return f, err
	}
	counters := map[string]*requestCounter{ActorAgents: newRequestCounter(), ActorKubelets: newRequestCounter(), ActorController: newRequestCounter()}
	agentCfg := rest.CopyConfig(e.admin)
	counters[ActorAgents].wrap(agentCfg)
	agentCfg.Dial = counters[ActorAgents].dial
	kubeletCfg := rest.CopyConfig(e.admin)
	counters[ActorKubelets].wrap(kubeletCfg)
	kubelets := newKubeletClients(kubeletCfg)
	// The controller's writes as the manager's: its service account, in
	// its own priority level.
	controllerCfg, err := deploy.ManagerConfig(ctx, e.admin, deploy.ManagerServiceAccount, time.Hour)
	if err != nil {
		return f, err
	}
	counters[ActorController].wrap(controllerCfg)
	controller, err := kubernetes.NewForConfig(controllerCfg)
	if err != nil {
		return f, err
	}
	broadcast := func(ctx context.Context, b protocol.Broadcast) error {
		return agent.Retry(ctx, func(ctx context.Context) error {
			cm.Data = protocol.EncodeBroadcast(b)
			updated, err := controller.CoreV1().ConfigMaps(ns.Name).Update(ctx, cm, metav1.UpdateOptions{})
			if err == nil {
				cm = updated
			}
			return err
		}, nil)
	}

	var changes *podChanges
	if countChanges {
		if changes, err = watchPodChanges(ctx, e.cs, ns.Name); err != nil {
			return f, err
		}
		defer changes.stop()
	}
	apiBefore, err := e.apiServerCounters(ctx)
	if err != nil {
		return f, err
	}
	// Bounded as a restart is; the first failure cancels the rest.
	timed, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g, work := errgroup.WithContext(timed)
	var patched sync.WaitGroup
	patched.Add(e.nodes)
	cpuBefore := e.cpu.snapshot()
	start := time.Now()
	if err := broadcast(ctx, protocol.Broadcast{DeprecatedEpoch: int32(epoch - 1), SyncedEpoch: int32(epoch - 1)}); err != nil {
		return f, err
	}
	g.Go(func() error {
		return parallel(work, e.nodes, e.nodes, func(ctx context.Context, i int) error {
			// A failed agent counts as patched: the floor fails anyway.
			var once sync.Once
			done := func() { once.Do(patched.Done) }
			defer done()
			return agentWork(ctx, agentCfg, tokens[i], ns.Name, names[i], int32(epoch), done)
		})
	})
	g.Go(func() error {
		if err := parallel(work, e.nodes, e.nodes, func(ctx context.Context, i int) error {
			// As the kubelet's status manager writes them: strategic merge
			// patches with the Pod's UID as precondition, each tried again
			// after a refusal (with the agents' retries); one the API
			// server rejects for good fails the floor.
			node := kubelets.node(fmt.Sprintf("%s-%d", simNodePrefix, i))
			for _, write := range writes {
				patch := write.forPod(uids[i])
				if err := agent.Retry(ctx, func(ctx context.Context) error {
					_, err := node.Pods(ns.Name).Patch(ctx, names[i], types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
					return err
				}, refusedForGood); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		f.StatusWrites = time.Since(start)
		// The controller writes the next epoch synced once every agent's
		// patch and every kubelet's last write returned; the floor ends
		// when every agent has seen it through the watch it opened.
		patched.Wait()
		return broadcast(work, protocol.Broadcast{DeprecatedEpoch: int32(epoch - 1), SyncedEpoch: int32(epoch)})
	})
	patched.Wait()
	f.Agents = time.Since(start)
	if err := g.Wait(); err != nil {
		return f, err
	}
	f.Total = time.Since(start)
	f.CPUSeconds = e.cpu.since(cpuBefore)
	f.Requests = map[string]map[string]int{}
	for actor, c := range counters {
		f.Requests[actor] = c.snapshot()
	}
	f.Handshakes = int(counters[ActorAgents].dials.Load())
	if changes != nil {
		// Read before the API server's count of watch events, so that
		// the count has this watch's events but perhaps the last few (it
		// grows just after each is written to a stream).
		if f.PodChanges, err = changes.count(ctx, timeout); err != nil {
			return f, err
		}
	}
	apiAfter, err := e.apiServerCounters(ctx)
	if err != nil {
		return f, err
	}
	f.WatchEvents, f.Rejected = apiAfter.since(apiBefore)
	return f, nil
}

// agentPolicyApplies checks that the agents' admission policy judges the
// floor's epoch patches, with a dry run that it must refuse for its epoch:
// lowering it to 0.
func (e *env) agentPolicyApplies(ctx context.Context, namespace, pod string, uid types.UID, token string) error {
	cfg := rest.AnonymousClientConfig(e.admin)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:"0"}}}`, uid, jobset.EpochKey)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		// Refused by the policy for the epoch, which it judges only once
		// the token passed as bound to this Pod on its node: not by RBAC,
		// whose cache may not show the Role yet either.
		return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "the epoch"), nil
	})
}

// floorPod copies a JobSet's Pod into the floor's namespace, bound to node:
// the same spec, labels, annotations and status, owned by nothing, without
// the labels by which the Job controller and inplace-manager select their
// Pods, and marked for the simulated node to leave alone.
func floorPod(sample *corev1.Pod, namespace, name, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: maps.Clone(sample.Labels), Annotations: maps.Clone(sample.Annotations)},
		Spec:   *sample.Spec.DeepCopy(),
		Status: *sample.Status.DeepCopy(),
	}
	for key := range pod.Labels {
		if strings.HasPrefix(key, "batch.kubernetes.io/") || key == "job-name" || key == "controller-uid" || key == jobset.JobSetNameKey {
			delete(pod.Labels, key)
		}
	}
	pod.Labels[simnode.NotRunLabel] = "true"
	pod.Spec.NodeName = node
	return pod
}

// agentWork is what one agent does against the API server after its Pod
// restarts in place, with the agent's own transport and retries: a new
// connection, a watch of the broadcast (one request, from the watch cache)
// and the patch of its epoch, after which it calls patched; then it waits,
// on the same watch, for its epoch synced.
func agentWork(ctx context.Context, base *rest.Config, token, namespace, pod string, epoch int32, patched func()) error {
	cfg := agent.ClientConfig(rest.AnonymousClientConfig(base))
	cfg.WrapTransport, cfg.Dial = base.WrapTransport, base.Dial
	cfg.BearerToken = token
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
	t := &agent.KubeTransport{Client: cs, Namespace: namespace, Pod: pod, JobSet: floorJobSet, Log: logr.Discard()}
	broadcasts, err := t.Broadcasts(ctx)
	if err != nil {
		return err
	}
	select {
	case <-broadcasts:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Retried as the agent retries its report after a refusal; rejected
	// for good (where the agent would read its Pod), it fails the floor.
	if err := agent.Retry(ctx, func(ctx context.Context) error { return t.ReportEpoch(ctx, epoch) }, refusedForGood); err != nil {
		return err
	}
	patched()
	for {
		select {
		case b, ok := <-broadcasts:
			if !ok {
				return fmt.Errorf("the broadcast's watch ended before epoch %d was synced", epoch)
			}
			if b.SyncedEpoch >= epoch {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
// controller grants the agents, under the controller's names: the
// RoleBinding is also the agents' admission policy's parameter, so the
// policy judges the floor's epoch patches as it judges the agents'.
func grantAgentRights(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: controller.AgentRoleName, Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"watch"}, ResourceNames: []string{protocol.BroadcastName(floorJobSet)}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}},
		},
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: controller.AgentRoleName, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: namespace}},
	}
	_, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{})
	return err
}
