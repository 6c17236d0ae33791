package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// KubeTransport is the API server transport: the agent watches its
// JobSet's broadcast ConfigMap and reads and patches its own Pod, which the
// agents' Role grants (controller/agent_rbac.go); nothing on the JobSet.
//
// Its requests are sent with client-go's own retries off (MaxRetries(0))
// and retried by the agent (Retry). client-go would wait out a refusal's
// Retry-After to the second, and API Priority and Fairness gives every
// request of a priority level it refuses in the same second the same
// Retry-After: a JobSet's agents refused together after an in-place
// restart would come back together, seconds later, and the API server
// would idle in between. The agent waits about as long as the server asks,
// spread (retryDelay).
type KubeTransport struct {
	Client    kubernetes.Interface
	Namespace string
	Pod       string
	JobSet    string
	Log       logr.Logger
}

var _ Transport = &KubeTransport{}

// ClientConfig returns how an agent talks to the API server, from the
// credentials it runs with: in protobuf, as kubelets and controllers do. A
// JobSet's agents all list, watch and read their Pods at once after every
// in-place restart; protobuf is cheaper than JSON for the API server to
// encode and for the agent to decode, and the API server encodes an object
// once per format for all its watchers.
func ClientConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	return cfg
}

// UserAgent is the agent's user agent, unless its configuration sets one.
const UserAgent = "inplace-agent"

// Broadcasts watches the broadcast ConfigMap, watching again with backoff
// and jitter when the watch fails, and delivers every distinct value.
//
// One request per watch, not a list and a watch: a watch from resource
// version "0" is served from the API server's watch cache and begins with
// the ConfigMap as the cache holds it (an ADDED event), then its changes. A
// JobSet's agents all start watching at once after every in-place restart;
// a list each would be a quarter of their requests.
func (k *KubeTransport) Broadcasts(ctx context.Context) (<-chan protocol.Broadcast, error) {
	name := protocol.BroadcastName(k.JobSet)
	open := func(ctx context.Context) (watch.Interface, error) {
		return k.Client.CoreV1().RESTClient().Get().Namespace(k.Namespace).Resource("configmaps").
			VersionedParams(&metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: "0",
				Watch: true,
			}, scheme.ParameterCodec).
			MaxRetries(0).Watch(ctx)
	}
	decode := func(o runtime.Object) (protocol.Broadcast, error) {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			return protocol.Broadcast{}, fmt.Errorf("a watch of ConfigMaps delivered a %T", o)
		}
		return protocol.DecodeBroadcast(cm.Data)
	}
	return watchBroadcasts(ctx, k.Log.WithValues("configmap", name), open, decode), nil
}

// watchBroadcasts runs the watches open starts, again with backoff and
// jitter when one fails, and delivers every distinct broadcast decode reads
// from the watched object.
func watchBroadcasts(ctx context.Context, log logr.Logger, open func(context.Context) (watch.Interface, error), decode func(runtime.Object) (protocol.Broadcast, error)) <-chan protocol.Broadcast {
	out := make(chan protocol.Broadcast, 1)
	go func() {
		defer close(out)
		var last *protocol.Broadcast
		deliver := func(o runtime.Object) {
			b, err := decode(o)
			if err != nil {
				log.Error(err, "ignoring an invalid broadcast")
				return
			}
			if last != nil && last.Equal(b) {
				return
			}
			last = &b
			select {
			case out <- b:
			case <-ctx.Done():
			}
		}
		// Paced as the agent's other requests: a watch refused must not
		// wait out a longer backoff than the read and the patch it holds
		// up.
		backoff := newRetryDelay()
		for ctx.Err() == nil {
			watched, err := watchOnce(ctx, open, deliver)
			if ctx.Err() != nil {
				return
			}
			if watched {
				// A watch that ran ends in the normal course (the API
				// server closes watches after a while): watch again
				// soon, not after the backoff of earlier failures.
				backoff = newRetryDelay()
			} else {
				log.V(1).Info("watching the broadcast failed; retrying", "error", err)
			}
			delay := backoff.after(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
	}()
	return out
}

// watchOnce delivers the watched object, then its changes, until the watch
// ends; watched says whether it ran and was closed without an error.
func watchOnce(ctx context.Context, open func(context.Context) (watch.Interface, error), deliver func(runtime.Object)) (watched bool, err error) {
	w, err := open(ctx)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			deliver(ev.Object)
		case watch.Error:
			return false, apierrors.FromObject(ev.Object)
		}
	}
	return true, nil
}

// ReportEpoch patches the epoch annotation of the agent's Pod.
func (k *KubeTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	return annotate(ctx, k.Client, k.Namespace, k.Pod, map[string]string{jobset.EpochKey: protocol.Epoch(epoch).String()})
}

var _ ProcessTransport = &KubeTransport{}

// ReportProcessEpoch patches the epoch and the worker restarts of the
// agent's Pod.
func (k *KubeTransport) ReportProcessEpoch(ctx context.Context, epoch, workerRestarts int32) error {
	return annotate(ctx, k.Client, k.Namespace, k.Pod, map[string]string{
		jobset.EpochKey:                   protocol.Epoch(epoch).String(),
		protocol.WorkerRestartsAnnotation: strconv.Itoa(int(workerRestarts)),
	})
}

// ReportWorkerExit patches a worker's exit on the agent's Pod.
func (k *KubeTransport) ReportWorkerExit(ctx context.Context, exit protocol.WorkerExit) error {
	return annotate(ctx, k.Client, k.Namespace, k.Pod, map[string]string{protocol.WorkerExitAnnotation: protocol.FormatWorkerExit(exit)})
}

// ReportState patches the whole of an agent's state on its Pod, in one
// write: what an agent that reported to the controller says on its Pod
// when it falls back.
func (k *KubeTransport) ReportState(ctx context.Context, r protocol.Report) error {
	annotations := map[string]string{jobset.EpochKey: protocol.Epoch(r.Epoch).String()}
	if r.WorkerRestarts > 0 {
		annotations[protocol.WorkerRestartsAnnotation] = strconv.Itoa(int(r.WorkerRestarts))
	}
	if r.WorkerExit != nil {
		annotations[protocol.WorkerExitAnnotation] = protocol.FormatWorkerExit(*r.WorkerExit)
	}
	if r.ReadyEpoch > 0 {
		annotations[protocol.ReadyEpochAnnotation] = protocol.Epoch(r.ReadyEpoch).String()
	}
	return annotate(ctx, k.Client, k.Namespace, k.Pod, annotations)
}

// ReportReady patches the epoch at which the Pod's workers are ready.
func (k *KubeTransport) ReportReady(ctx context.Context, epoch int32) error {
	return annotate(ctx, k.Client, k.Namespace, k.Pod, map[string]string{protocol.ReadyEpochAnnotation: protocol.Epoch(epoch).String()})
}

// annotate sets annotations of a Pod with a merge patch.
func annotate(ctx context.Context, c kubernetes.Interface, namespace, pod string, annotations map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	err = c.CoreV1().RESTClient().Patch(types.MergePatchType).Namespace(namespace).Resource("pods").Name(pod).
		Body(patch).MaxRetries(0).Do(ctx).Error()
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return fmt.Errorf("%w: %w", ErrReportRefused, err)
	}
	return err
}

// Self reads the agent's Pod, retrying until it can: after an in-place
// restart of a large JobSet every agent asks at once, and a busy API
// server's refusal (429) or timeout must not fail the agent. A Pod that is
// gone or a read that is forbidden is final.
func (k *KubeTransport) Self(ctx context.Context) (int32, Workers, error) {
	pod, err := readPod(ctx, k.Log, k.Client, k.Namespace, k.Pod)
	if err != nil {
		return 0, WorkersStopped, err
	}
	return PodState(pod)
}

// readPod reads a Pod, retrying until it can; a Pod that is gone or a read
// that is forbidden is final.
func readPod(ctx context.Context, log logr.Logger, c kubernetes.Interface, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := Retry(ctx, func(ctx context.Context) error {
		err := c.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").Name(name).
			MaxRetries(0).Do(ctx).Into(pod)
		if err != nil {
			log.V(1).Info("reading its own Pod failed", "error", err)
		}
		return err
	}, func(err error) bool {
		return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
	})
	return pod, err
}

// retryBackoff paces an agent's retries of a request the whole group waits
// on after a failure other than a refusal: quick at first, jittered so
// that a thousand agents that fail at once do not come back at once, and
// capped so that none waits long after the API server recovers.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 5 * time.Second}
}

// Retry calls try until it succeeds, fails for good (final, which may be
// nil, says which errors are final), or ctx ends; the error then names the
// last failure. It never gives up on its own: wait.Backoff's steps end
// when its delay reaches the cap (after about 6 s here).
//
// Between tries it waits as retryDelay says.
func Retry(ctx context.Context, try func(context.Context) error, final func(error) bool) error {
	return retry(ctx, newRetryDelay(), try, final)
}

func retry(ctx context.Context, delay *retryDelay, try func(context.Context) error, final func(error) bool) error {
	for {
		err := try(ctx)
		if err == nil || (final != nil && final(err)) {
			return err
		}
		t := time.NewTimer(delay.after(err))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// retryDelay is the wait before the next try of a failed request.
//
// A refusal by API Priority and Fairness (429) carries a Retry-After that
// the API server raises while a priority level's refusals go on: the agent
// waits about that long, spread, since the server gives one Retry-After, in
// whole seconds, to every request of a priority level it refuses within a
// second, and agents refused together would come back together to a
// server that has emptied its queues meanwhile. Each waits the Retry-After
// plus a random part of as long again.
//
// But the server lowers its Retry-After only when it refuses again: after
// a burst of refusals it stays high (up to 32 s) until the next one, which
// may come minutes later, at the next restart, and carry it. So the wait
// follows the server's Retry-After only as far as this request's own
// refusals bear it out: at most 1 s (then spread) after its first refusal,
// doubling with each refusal after it. An agent refused once waits a
// second or two whatever the server's history; agents refused again and
// again, when thousands restart at once, come to wait as long as the
// server asks. Timeouts and dropped connections wait the jittered backoff.
type retryDelay struct {
	backoff  wait.Backoff
	refusals int
}

func newRetryDelay() *retryDelay { return &retryDelay{backoff: retryBackoff()} }

// maxTrustedRefusals: 1 s doubled 5 times is 32 s, APF's highest
// Retry-After.
const maxTrustedRefusals = 6

func (d *retryDelay) after(err error) time.Duration {
	delay := d.backoff.Step()
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok && seconds > 0 && apierrors.IsTooManyRequests(err) {
		d.refusals = min(d.refusals+1, maxTrustedRefusals)
		asked := min(time.Duration(seconds)*time.Second, time.Second<<(d.refusals-1))
		delay = max(delay, wait.Jitter(asked, 1))
	}
	return delay
}

// PodState returns the epoch a Pod carries and what its workers do.
func PodState(pod *corev1.Pod) (int32, Workers, error) {
	return podState(pod, jobset.EpochKey, protocol.ParseEpoch)
}

// podState returns the epoch a Pod carries on the annotation key, read by
// parse (protocol.ParseAttempt for upstream JobSet's attempts, which count
// from 0), and what its workers do (workersOf).
func podState(pod *corev1.Pod, key string, parse func(string) (protocol.Epoch, error)) (int32, Workers, error) {
	var epoch int32
	if v, ok := pod.Annotations[key]; ok {
		n, err := parse(v)
		if err != nil {
			return 0, WorkersStopped, fmt.Errorf("pod annotation %s is %q: want a non-negative int32", key, v)
		}
		epoch = int32(n)
	}
	return epoch, workersOf(pod), nil
}

// workersOf tells what the Pod's workers (its regular containers) do, for
// an agent that starts: all running; none run since the agent's previous
// run started (WorkersWaiting: the agent, an init container whose
// environment carries the restart exit code, restarted alone before they
// started); otherwise stopped.
//
// An agent whose previous run the kubelet ended to restart every container
// of the Pod (reason RestartingAllContainers) did not restart alone:
// stopped. Otherwise waiting is judged by time: no worker's last
// termination is later than the start of the agent's previous run, and
// none lacks its time (then nothing is known, and stopped is the safe
// answer: a new epoch, as before agents could resume). A worker that ran
// behind that run's barrier started after it, and ended after it too. The
// API's times are whole seconds, so an end in the same second counts as
// before: a worker cannot start before the group synced and the barrier
// lifted, which takes the agent's previous run more than its first
// moments.
func workersOf(pod *corev1.Pod) Workers {
	running := len(pod.Status.ContainerStatuses) > 0
	for _, s := range pod.Status.ContainerStatuses {
		running = running && s.State.Running != nil
	}
	if running {
		return WorkersRunning
	}
	var previousRun *metav1.Time
	for _, c := range pod.Spec.InitContainers {
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == protocol.EnvRestartExitCode }) {
			continue
		}
		for _, s := range pod.Status.InitContainerStatuses {
			t := s.LastTerminationState.Terminated
			if s.Name != c.Name || t == nil {
				continue
			}
			if t.Reason == protocol.ReasonRestartingAllContainers {
				return WorkersStopped
			}
			if !t.StartedAt.IsZero() {
				previousRun = &t.StartedAt
			}
		}
	}
	if previousRun == nil {
		return WorkersStopped
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil {
			return WorkersStopped
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && (t.FinishedAt.IsZero() || t.FinishedAt.After(previousRun.Time)) {
				return WorkersStopped
			}
		}
	}
	return WorkersWaiting
}
