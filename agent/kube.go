package agent

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/inplace-dev/inplace/broadcast"
)

// KubeTransport is the API server transport: the agent watches its
// JobSet's broadcast ConfigMap and patches its own Pod. It needs get, list
// and watch on that ConfigMap and get and patch on its Pod, nothing on the
// JobSet.
//
// Its requests are sent with client-go's own retries off (MaxRetries(0))
// and retried by the agent, with jittered backoff. client-go would wait
// out a refusal's Retry-After to the second, and API Priority and Fairness
// gives every request of a priority level it refuses in the same second
// the same Retry-After (growing while the refusals go on): a JobSet's
// agents refused together after an in-place restart would come back
// together, seconds later, and the API server would idle in between.
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

// Broadcasts lists and watches the broadcast ConfigMap, re-listing with
// backoff and jitter when the watch ends, and delivers every distinct value.
func (k *KubeTransport) Broadcasts(ctx context.Context) (<-chan broadcast.Broadcast, error) {
	out := make(chan broadcast.Broadcast, 1)
	name := broadcast.Name(k.JobSet)
	go func() {
		defer close(out)
		var last *broadcast.Broadcast
		deliver := func(cm *corev1.ConfigMap) {
			b, err := broadcast.Decode(cm.Data)
			if err != nil {
				k.Log.Error(err, "ignoring an invalid broadcast", "configmap", name)
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
		// Paced as the agent's other requests: a re-list after a refusal
		// must not wait out a longer backoff than the read and the patch
		// it holds up.
		backoff := RetryBackoff()
		for ctx.Err() == nil {
			// ResourceVersion "0": served from the apiserver's watch cache,
			// not read from etcd — a thousand agents list at once after a
			// restart. The watch from the list's version delivers anything
			// newer.
			list := &corev1.ConfigMapList{}
			err := k.Client.CoreV1().RESTClient().Get().Namespace(k.Namespace).Resource("configmaps").
				VersionedParams(&metav1.ListOptions{
					FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: "0",
				}, scheme.ParameterCodec).
				MaxRetries(0).Do(ctx).Into(list)
			if err == nil && len(list.Items) == 1 {
				deliver(&list.Items[0])
				var watched bool
				watched, err = k.watch(ctx, name, list.ResourceVersion, deliver)
				if watched {
					// A watch that ran ends in the normal course (the API
					// server closes watches after a while): re-list at
					// once, not after the backoff of earlier failures.
					backoff = RetryBackoff()
				}
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				k.Log.V(1).Info("broadcast watch ended; re-listing", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff.Step()):
			}
		}
	}()
	return out, nil
}

// watch delivers the broadcast's changes after rv until the watch ends;
// watched says whether it ran and was closed without an error.
func (k *KubeTransport) watch(ctx context.Context, name, rv string, deliver func(*corev1.ConfigMap)) (watched bool, err error) {
	w, err := k.Client.CoreV1().RESTClient().Get().Namespace(k.Namespace).Resource("configmaps").
		VersionedParams(&metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv,
			AllowWatchBookmarks: true, Watch: true,
		}, scheme.ParameterCodec).
		MaxRetries(0).Watch(ctx)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				deliver(cm)
			}
		case watch.Error:
			return false, apierrors.FromObject(ev.Object)
		}
	}
	return true, fmt.Errorf("watch closed")
}

// ReportEpoch patches the epoch annotation of the agent's Pod.
func (k *KubeTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		jobset.EpochKey: strconv.Itoa(int(epoch)),
	}}})
	if err != nil {
		return err
	}
	return k.Client.CoreV1().RESTClient().Patch(types.MergePatchType).Namespace(k.Namespace).Resource("pods").Name(k.Pod).
		Body(patch).MaxRetries(0).Do(ctx).Error()
}

// Self reads the agent's Pod, retrying with backoff and jitter until it
// can: after an in-place restart of a large JobSet every agent asks at
// once, and a busy API server's refusal (429) or timeout must not fail the
// agent. A Pod that is gone or a read that is forbidden is final.
func (k *KubeTransport) Self(ctx context.Context) (int32, bool, error) {
	pod := &corev1.Pod{}
	var last error
	err := Retry(ctx, func(ctx context.Context) (bool, error) {
		last = k.Client.CoreV1().RESTClient().Get().Namespace(k.Namespace).Resource("pods").Name(k.Pod).
			MaxRetries(0).Do(ctx).Into(pod)
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsNotFound(last), apierrors.IsForbidden(last), apierrors.IsUnauthorized(last):
			return false, last
		}
		k.Log.V(1).Info("reading its own Pod failed; retrying", "error", last)
		return false, nil
	})
	if err != nil {
		if last != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
		return 0, false, err
	}
	return PodState(pod)
}

// RetryBackoff paces an agent's retries of a request the whole group waits
// on: quick at first, jittered so that a thousand agents refused at once do
// not come back at once, and capped so that none waits long after the API
// server recovers.
func RetryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 5 * time.Second}
}

// Retry calls condition until it is done or fails, or ctx ends, waiting
// RetryBackoff between calls. It never gives up on its own:
// wait.ExponentialBackoffWithContext would, since a Backoff's steps end
// when its delay reaches the cap (here after about 6 s).
func Retry(ctx context.Context, condition wait.ConditionWithContextFunc) error {
	return retry(ctx, RetryBackoff(), condition)
}

func retry(ctx context.Context, b wait.Backoff, condition wait.ConditionWithContextFunc) error {
	return b.DelayFunc().Until(ctx, true, true, condition)
}

// PodState returns the epoch a Pod carries and whether its worker
// containers all run.
func PodState(pod *corev1.Pod) (int32, bool, error) {
	var epoch int32
	if v, ok := pod.Annotations[jobset.EpochKey]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("pod annotation %s is %q: %w", jobset.EpochKey, v, err)
		}
		epoch = int32(n)
	}
	running := len(pod.Status.ContainerStatuses) > 0
	for _, s := range pod.Status.ContainerStatuses {
		running = running && s.State.Running != nil
	}
	return epoch, running, nil
}
