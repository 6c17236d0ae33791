package simnode

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Annotations that drive failures.
const (
	ExitCodeAnnotation = "sim.inplace.dev/exit-code"
	CrashAnnotation    = "sim.inplace.dev/crash"
	// NodeLabel marks simulated Nodes.
	NodeLabel = "sim.inplace.dev/node"
	// NotRunLabel marks Pods bound to a simulated node that its kubelet
	// leaves alone: their status is whatever others write. A benchmark's
	// stand-ins for Pods use it; the API server sees Pods bound to real
	// Nodes.
	NotRunLabel = "sim.inplace.dev/not-run"
)

// Options configure the simulated nodes.
type Options struct {
	// Client watches the Pods of every simulated node, and is each node's
	// kubelet's client unless NodeClient is set.
	Client kubernetes.Interface
	// NodeClient, when set, returns the client of one node's kubelet: a
	// client per node, with its own identity, as real kubelets have.
	NodeClient func(node string) corev1client.CoreV1Interface
	// Nodes is how many Nodes to register, named <Prefix>-<i>.
	Nodes  int
	Prefix string
	// AgentContainer is the name of the agent init container.
	AgentContainer string
	// AgentConfig, when set, makes every agent authenticate with a token
	// bound to its Pod (the Pod's service account), against this config's
	// server, as a kubelet-projected token does; unset, agents use Client.
	AgentConfig *rest.Config
	// Recorder, when set, records the moments tests and benchmarks time.
	Recorder *Recorder
	// Network is the Pod network, when the caller listens on it too (a
	// leader in this process, for its agents' reports); nil makes one.
	Network *Network
	// Latency is the node-side time spent starting and stopping Pods and
	// containers; zero for the tests.
	Latency Latency
	Log     logr.Logger
}

// Sim is a running set of simulated nodes.
type Sim struct {
	opts   Options
	mu     sync.Mutex
	pods   map[types.UID]*podRunner
	nodes  map[string]bool
	nextIP int
	// podNet connects the kubelets' probes to the agents, and the
	// agents to a leader that listens on it.
	podNet *Network
	prober *http.Client
	wg     sync.WaitGroup
	lat    atomic.Pointer[Latency]
}

// Start registers the Nodes and runs the Pods bound to them until ctx ends.
func Start(ctx context.Context, opts Options) (*Sim, error) {
	s := &Sim{opts: opts, pods: map[types.UID]*podRunner{}, nodes: map[string]bool{}, podNet: opts.Network}
	if s.podNet == nil {
		s.podNet = NewNetwork()
	}
	s.prober = s.podNet.probeClient()
	s.SetLatency(opts.Latency)
	for i := range opts.Nodes {
		name := fmt.Sprintf("%s-%d", opts.Prefix, i)
		if err := s.registerNode(ctx, name); err != nil {
			return nil, err
		}
		s.nodes[name] = true
	}
	lw := cache.NewListWatchFromClient(opts.Client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.OneTermNotEqualSelector("spec.nodeName", ""))
	_, podInformer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.observe(ctx, obj) },
			UpdateFunc: func(_, obj any) { s.observe(ctx, obj) },
			DeleteFunc: func(obj any) { s.forget(obj) },
		},
	})
	nodeLW := cache.NewListWatchFromClient(opts.Client.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll, fields.Everything())
	_, nodeInformer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: nodeLW, ObjectType: &corev1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { s.nodeLost(ctx, obj) }},
	})
	go podInformer.Run(ctx.Done())
	go nodeInformer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.HasSynced, nodeInformer.HasSynced) {
		return nil, fmt.Errorf("simulated nodes: caches did not sync")
	}
	return s, nil
}

// Wait waits until every Pod runner has stopped (after ctx ended).
func (s *Sim) Wait() { s.wg.Wait() }

// SetLatency changes the node-side latency from now on and returns the
// latency it replaces.
func (s *Sim) SetLatency(l Latency) (previous Latency) {
	if old := s.lat.Swap(&l); old != nil {
		return *old
	}
	return Latency{}
}

func (s *Sim) latency() Latency { return *s.lat.Load() }

// kubelet is the client of one node's kubelet.
func (s *Sim) kubelet(node string) corev1client.CoreV1Interface {
	if s.opts.NodeClient != nil {
		return s.opts.NodeClient(node)
	}
	return s.opts.Client.CoreV1()
}

func (s *Sim) registerNode(ctx context.Context, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("110"),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, NodeLabel: "true"}}}
	created, err := s.kubelet(name).Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = s.kubelet(name).Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	created.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		// Pods with RestartAllContainers rules are scheduled only onto Nodes
		// that declare the feature.
		DeclaredFeatures: []string{"RestartAllContainersOnContainerExits"},
	}
	_, err = s.kubelet(name).Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// observe starts a runner for a new Pod on one of our Nodes and passes
// updates to existing runners.
func (s *Sim) observe(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if _, skip := pod.Labels[NotRunLabel]; skip {
		return
	}
	s.mu.Lock()
	if !s.nodes[pod.Spec.NodeName] {
		s.mu.Unlock()
		return
	}
	r, ok := s.pods[pod.UID]
	if !ok {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			s.mu.Unlock()
			return
		}
		r = newPodRunner(s, pod, s.nextPodIP())
		s.pods[pod.UID] = r
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r.run(ctx)
		}()
	}
	s.mu.Unlock()
	r.update(pod)
}

// nextPodIP gives a Pod the next address of this simulator's Pod network.
func (s *Sim) nextPodIP() string {
	s.nextIP++
	return fmt.Sprintf("10.%d.%d.%d", (s.nextIP/62500)%250, 1+(s.nextIP/250)%250, 1+s.nextIP%250)
}

func (s *Sim) forget(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			pod, ok = d.Obj.(*corev1.Pod)
		}
	}
	if !ok {
		return
	}
	s.mu.Lock()
	r := s.pods[pod.UID]
	delete(s.pods, pod.UID)
	s.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// nodeLost fails the Pods of a deleted Node, as a lost node's Pods fail,
// and deletes them, as the Pod garbage collector does (after a quarantine
// the simulation skips).
func (s *Sim) nodeLost(ctx context.Context, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	if !s.nodes[node.Name] {
		s.mu.Unlock()
		return
	}
	delete(s.nodes, node.Name)
	var lost []*podRunner
	for _, r := range s.pods {
		if r.nodeName == node.Name {
			lost = append(lost, r)
		}
	}
	s.mu.Unlock()
	for _, r := range lost {
		r.fail(ctx, "NodeLost", fmt.Sprintf("node %s was lost", node.Name))
		err := s.opts.Client.CoreV1().Pods(r.namespace).Delete(ctx, r.name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &r.uid},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			s.opts.Log.Error(err, "deleting a Pod of a lost node", "pod", r.namespace+"/"+r.name)
		}
	}
}
