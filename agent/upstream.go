package agent

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

// UpstreamTransport speaks upstream JobSet's in-place restart protocol, so
// that this agent can stand in for upstream's in a manifest written for
// it: it watches the JobSet itself and reads
// status.previousInPlaceRestartAttempt and currentInPlaceRestartAttempt,
// and reports on the Pod annotation jobset.sigs.k8s.io/in-place-restart-attempt.
// Attempts count from 0 where epochs count from 1 (protocol.Epoch).
// Its service account needs get, list and watch on the JobSet and patch on
// its Pod, as upstream's agent does.
type UpstreamTransport struct {
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
	Pod       string
	JobSet    string
	Log       logr.Logger
}

var _ Transport = &UpstreamTransport{}

var jobSetsResource = jobset.GroupVersion.WithResource("jobsets")

// Broadcasts watches the JobSet, from the API server's watch cache, and
// delivers what its status says for the agents.
func (u *UpstreamTransport) Broadcasts(ctx context.Context) (<-chan protocol.Broadcast, error) {
	open := func(ctx context.Context) (watch.Interface, error) {
		return u.Dynamic.Resource(jobSetsResource).Namespace(u.Namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", u.JobSet).String(), ResourceVersion: "0",
		})
	}
	decode := func(o runtime.Object) (protocol.Broadcast, error) {
		js, ok := o.(*unstructured.Unstructured)
		if !ok {
			return protocol.Broadcast{}, fmt.Errorf("a watch of JobSets delivered a %T", o)
		}
		return UpstreamBroadcast(js.Object)
	}
	return watchBroadcasts(ctx, u.Log.WithValues("jobset", u.JobSet), open, decode), nil
}

// UpstreamBroadcast reads, from a JobSet, what upstream JobSet's agents
// read: its attempts, and whether in-place restarts are off for it (the
// disable-in-place-restart annotation, or another restart strategy).
func UpstreamBroadcast(js map[string]any) (protocol.Broadcast, error) {
	var b protocol.Broadcast
	if _, off, _ := unstructured.NestedString(js, "metadata", "annotations", jobset.DisableInPlaceRestartKey); off {
		b.Disabled = true
	}
	if strategy, _, _ := unstructured.NestedString(js, "spec", "failurePolicy", "restartStrategy"); strategy != string(jobset.InPlaceRestart) {
		b.Disabled = true
	}
	for field, epoch := range map[string]*int32{"previousInPlaceRestartAttempt": &b.DeprecatedEpoch, "currentInPlaceRestartAttempt": &b.SyncedEpoch} {
		v, found, err := unstructured.NestedInt64(js, "status", field)
		if err != nil {
			return protocol.Broadcast{}, fmt.Errorf("status.%s: want a non-negative int32", field)
		}
		if found {
			e, err := protocol.EpochOfAttemptNumber(v)
			if err != nil {
				return protocol.Broadcast{}, fmt.Errorf("status.%s: want a non-negative int32", field)
			}
			*epoch = int32(e)
		}
	}
	return b, nil
}

// ReportEpoch writes the epoch as upstream's attempt.
func (u *UpstreamTransport) ReportEpoch(ctx context.Context, epoch int32) error {
	return annotate(ctx, u.Client, u.Namespace, u.Pod, map[string]string{jobset.InPlaceRestartAttemptKey: protocol.Epoch(epoch).AttemptString()})
}

// Self reads the agent's Pod: its attempt as an epoch, and whether its
// workers run. Upstream's agent never reads its Pod, and the Role upstream
// documents grants only patch: without get, the agent starts as upstream's
// does, at a new attempt.
func (u *UpstreamTransport) Self(ctx context.Context) (int32, Workers, error) {
	pod, err := readPod(ctx, u.Log, u.Client, u.Namespace, u.Pod)
	if apierrors.IsForbidden(err) {
		u.Log.Info("may not read its own Pod: starting at a new attempt", "error", err.Error())
		return 0, WorkersStopped, nil
	}
	if err != nil {
		return 0, WorkersStopped, err
	}
	return podState(pod, jobset.InPlaceRestartAttemptKey, protocol.ParseAttempt)
}
