package restartbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/upstreamjobset"
)

// ProfileReal names the figures of real kubelets and containerd.
const ProfileReal = "real"

// auditPolicy records every request once it completed, and a watch once
// it began (it completes when it ends, maybe after the benchmark), without
// bodies: who sent it, its verb and resource, and when it was received.
// The benchmark counts every actor's requests from it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// auditFlags make the API server write the audit log to dir/audit.log.
func auditFlags(dir string) (map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    filepath.Join(dir, "audit.log"),
		"audit-log-format":  "json",
		"audit-log-maxsize": "0",
	}, nil
}

type auditEvent struct {
	Stage string `json:"stage"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
}

// actorOf names the actor of a request by its user: the nodes' kubelets,
// the agents (the service accounts of the benchmark's namespaces), the
// manager or upstream JobSet's controller; "" for the others (the control
// plane's own components).
func actorOf(user string) string {
	switch {
	case strings.HasPrefix(user, "system:node:"):
		return ActorKubelets
	case user == serviceaccount.MakeUsername(deploy.ManagerNamespace, deploy.ManagerServiceAccount),
		user == serviceaccount.MakeUsername(upstreamjobset.Namespace, upstreamjobset.ServiceAccount):
		return ActorController
	case strings.HasPrefix(user, serviceaccount.ServiceAccountUsernamePrefix+benchNamespacePrefix):
		return ActorAgents
	}
	return ""
}

// countAudited fills every result's requests from the audit log: the
// requests each actor sent from the failure until every worker ran again,
// counted by when the API server received them. It reads the log once the
// measurements are over, since a watch is logged when it ends.
func countAudited(path string, results []Result) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := range results {
		results[i].Requests = map[string]map[string]int{ActorController: {}, ActorAgents: {}, ActorKubelets: {}}
		results[i].CriticalRequests = map[string]map[string]int{ActorController: {}, ActorAgents: {}, ActorKubelets: {}}
	}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		actor := actorOf(ev.User.Username)
		// Each request once: a watch as it began, any other as it ended.
		stage := "ResponseComplete"
		if ev.Verb == "watch" {
			stage = "ResponseStarted"
		}
		if ev.Stage != stage || actor == "" || ev.ObjectRef == nil {
			continue
		}
		key := ev.Verb + " " + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			key += "/" + ev.ObjectRef.Subresource
		}
		at := ev.RequestReceived.Time
		for i := range results {
			if r := &results[i]; !at.Before(r.from) && !at.After(r.to) {
				r.Requests[actor][key]++
				if !at.After(r.released) {
					r.CriticalRequests[actor][key]++
				}
			}
		}
	}
	return scanner.Err()
}

// podObserver records, for real nodes, the moments the simulated nodes
// record themselves, as the API server shows them (so a little after the
// node saw them): a worker's exit written, an agent or a worker started, a
// Pod's epoch written. The kubelet reports a container started in its next
// status write; the time is that write's, seen by a watch.
type podObserver struct {
	recorder *simnode.Recorder
	mu       sync.Mutex
	pods     map[types.UID]*podSeen
}

// podSeen is what was last recorded of one Pod.
type podSeen struct {
	containers map[string]string // running container ID by name
	exited     map[string]bool   // container IDs whose exit was recorded
	epoch      int32
	observed   bool // PodObserved recorded
	// workerExit is the last worker exit written in process scope.
	workerExit string
}

func observePods(ctx context.Context, cs kubernetes.Interface, recorder *simnode.Recorder) error {
	o := &podObserver{recorder: recorder, pods: map[types.UID]*podSeen{}}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.observe(obj) },
			UpdateFunc: func(_, obj any) { o.observe(obj) },
			DeleteFunc: func(obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					o.mu.Lock()
					delete(o.pods, p.UID)
					o.mu.Unlock()
				}
			},
		},
	})
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("watching the Pods of the real nodes: %w", ctx.Err())
	}
	return nil
}

func (o *podObserver) observe(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !strings.HasPrefix(p.Namespace, benchNamespacePrefix) {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.pods[p.UID]
	if seen == nil {
		seen = &podSeen{containers: map[string]string{}, exited: map[string]bool{}}
		o.pods[p.UID] = seen
	}
	record := func(kind simnode.EventKind, exitCode int32) {
		o.recorder.Record(simnode.Event{Time: now, Kind: kind, Namespace: p.Namespace, Pod: p.Name,
			ReplicatedJob: p.Labels[jobset.ReplicatedJobNameKey], Epoch: seen.epoch, ExitCode: exitCode})
	}
	if !seen.observed {
		seen.observed = true
		record(simnode.PodObserved, 0)
	}
	if epoch, ok := podEpoch(p); ok && epoch != seen.epoch {
		seen.epoch = epoch
		record(simnode.EpochWritten, 0)
	}
	if v, ok := p.Annotations[protocol.WorkerExitAnnotation]; ok && v != seen.workerExit {
		seen.workerExit = v
		if e, err := protocol.ParseWorkerExit(v); err == nil {
			record(simnode.ExitWritten, int32(e.Code))
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if (s.Name == agentContainer || s.Name == upstreamjobset.AgentContainer) && s.State.Running != nil && seen.containers[s.Name] != s.ContainerID {
			seen.containers[s.Name] = s.ContainerID
			record(simnode.AgentStarted, 0)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Running != nil && seen.containers[s.Name] != s.ContainerID:
			seen.containers[s.Name] = s.ContainerID
			record(simnode.WorkersStarted, 0)
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 && !seen.exited[s.State.Terminated.ContainerID]:
			seen.exited[s.State.Terminated.ContainerID] = true
			record(simnode.ExitWritten, s.State.Terminated.ExitCode)
		}
	}
}

// podEpoch is the epoch the Pod's agent wrote: inplace's epoch annotation,
// or upstream's agent's in-place restart attempt, read as the epoch it
// stands for.
func podEpoch(p *corev1.Pod) (int32, bool) {
	if v, ok := p.Annotations[jobset.EpochKey]; ok {
		epoch, err := protocol.ParseEpoch(v)
		return int32(epoch), err == nil
	}
	if v, ok := p.Annotations[jobset.InPlaceRestartAttemptKey]; ok {
		epoch, err := protocol.ParseAttempt(v)
		return int32(epoch), err == nil
	}
	return 0, false
}
