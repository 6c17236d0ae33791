package decide

import (
	"crypto/sha1" //nolint:gosec // a short label value, not a security boundary
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/state"
)

// jobKey identifies a Job in label selectors, where its name may not fit.
func jobKey(namespace, name string) string {
	sum := sha1.Sum([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:])
}

// Subdomain is the name of the headless Service and the Pods' subdomain.
func Subdomain(js *jobset.JobSet) string {
	if js.Spec.Network != nil && js.Spec.Network.Subdomain != "" {
		return js.Spec.Network.Subdomain
	}
	return js.Name
}

// DNSHostnamesEnabled reports whether the JobSet's Pods get DNS hostnames,
// which the headless Service gives them (the default).
func DNSHostnamesEnabled(js *jobset.JobSet) bool {
	return js.Spec.Network == nil || ptr.Deref(js.Spec.Network.EnableDNSHostnames, true)
}

// coordinatorEndpoint is the stable DNS name of the coordinator Pod.
func coordinatorEndpoint(js *jobset.JobSet) string {
	c := js.Spec.Coordinator
	return fmt.Sprintf("%s-%d.%s", state.JobName(js.Name, c.ReplicatedJob, c.JobIndex), c.PodIndex, Subdomain(js))
}

// jobLayout is where a Job sits in its JobSet: the indexes and counts that
// become its reserved labels.
type jobLayout struct {
	globalIndex    int
	groupIndex     int
	groupReplicas  int
	globalReplicas int
}

// layoutOf computes, for replicated Job rjIdx and Job index, its global and
// group indexes: Jobs are numbered in spec order, groups counted apart.
func layoutOf(js *jobset.JobSet, rjIdx, index int) jobLayout {
	l := jobLayout{}
	group := js.Spec.ReplicatedJobs[rjIdx].GroupName
	for i, rj := range js.Spec.ReplicatedJobs {
		replicas := int(rj.Replicas)
		l.globalReplicas += replicas
		if i < rjIdx {
			l.globalIndex += replicas
		}
		if rj.GroupName == group {
			l.groupReplicas += replicas
			if i < rjIdx {
				l.groupIndex += replicas
			}
		}
	}
	l.globalIndex += index
	l.groupIndex += index
	return l
}

// buildJob returns the Job at index of replicated Job rjIdx for the current
// restart attempt, its Pods labelled with their priority as prio resolves
// it. js must be defaulted.
func buildJob(js *jobset.JobSet, rjIdx, index int, suspend bool, prio Priorities) *batchv1.Job {
	rj := &js.Spec.ReplicatedJobs[rjIdx]
	name := state.JobName(js.Name, rj.Name, index)
	layout := layoutOf(js, rjIdx, index)

	meta := map[string]string{
		jobset.JobSetNameKey:            js.Name,
		jobset.JobSetUIDKey:             string(js.UID),
		jobset.ReplicatedJobNameKey:     rj.Name,
		jobset.ReplicatedJobReplicasKey: strconv.Itoa(int(rj.Replicas)),
		jobset.GlobalReplicasKey:        strconv.Itoa(layout.globalReplicas),
		jobset.JobIndexKey:              strconv.Itoa(index),
		jobset.JobGlobalIndexKey:        strconv.Itoa(layout.globalIndex),
		jobset.JobKey:                   jobKey(js.Namespace, name),
		jobset.RestartsKey:              strconv.Itoa(int(jobset.RecreateAttempt(&js.Status))),
		jobset.JobRestartAttemptKey:     strconv.Itoa(int(jobset.JobRestarts(js, rj.Name, index))),
		jobset.GroupNameKey:             rj.GroupName,
		jobset.GroupReplicasKey:         strconv.Itoa(layout.groupReplicas),
		jobset.JobGroupIndexKey:         strconv.Itoa(layout.groupIndex),
	}
	if js.Spec.Coordinator != nil {
		meta[jobset.CoordinatorKey] = coordinatorEndpoint(js)
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       js.Namespace,
			Labels:          merged(rj.Template.Labels, meta),
			Annotations:     merged(rj.Template.Annotations, meta),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))},
		},
		Spec: *rj.Template.Spec.DeepCopy(),
	}
	pod := &job.Spec.Template
	pod.Labels = merged(pod.Labels, meta)
	pod.Annotations = merged(pod.Annotations, meta)
	if DNSHostnamesEnabled(js) {
		// With a subdomain, the Job controller names each Pod of an Indexed
		// Job <job>-<index>, so <job>-<index>.<subdomain> resolves through
		// the headless Service.
		pod.Spec.Subdomain = Subdomain(js)
	}
	addClaimVolumes(js, &pod.Spec)
	priority := addPriority(js, rj, pod, prio)
	addExclusivePlacement(js, rj, job, priority)
	job.Spec.Suspend = ptr.To(suspend)
	return job
}

// merged returns base overlaid with overlay, leaving both untouched.
func merged(base, overlay map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(overlay))
	maps.Copy(out, base)
	maps.Copy(out, overlay)
	return out
}

// JobUpdate is a Job as the cache holds it and as it must become.
type JobUpdate struct {
	Cached, Want *batchv1.Job
}

// resumedJob returns the cached Job unsuspended, with what its Pod
// template gained from the JobSet's template as it is now: the labels and
// annotations merged over the Job's (as upstream JobSet does: the Job API,
// other webhooks and policy engines add their own, which are kept), the
// nodeSelector, tolerations and schedulingGates replaced. Those are what a
// queueing controller (Kueue) writes when it admits a suspended JobSet to a
// flavor, often in the very update that resumes it, and what the Job API
// lets change while a Job is suspended: the Jobs were built from the
// template as it was, and their Pods must start with the template as it
// is. The scheduling directives are replaced, not merged, so that a
// flavor's node selector left from an earlier admission never keeps a Pod
// off the nodes of the next. js must be defaulted.
func resumedJob(js *jobset.JobSet, cached *batchv1.Job, prio Priorities) *batchv1.Job {
	job := cached.DeepCopy() // the cache's object is read-only
	job.Spec.Suspend = ptr.To(false)
	rjIdx := slices.IndexFunc(js.Spec.ReplicatedJobs, func(rj jobset.ReplicatedJob) bool {
		return rj.Name == cached.Labels[jobset.ReplicatedJobNameKey]
	})
	index, err := strconv.Atoi(cached.Labels[jobset.JobIndexKey])
	if rjIdx < 0 || err != nil || index < 0 {
		// Not a Job of the current attempt (isCurrentAttempt would not
		// have let it here): resumed as it is.
		return job
	}
	built := buildJob(js, rjIdx, index, false, prio).Spec.Template
	pod := &job.Spec.Template
	pod.Labels = merged(pod.Labels, built.Labels)
	pod.Annotations = merged(pod.Annotations, built.Annotations)
	pod.Spec.NodeSelector = built.Spec.NodeSelector
	pod.Spec.Tolerations = built.Spec.Tolerations
	pod.Spec.SchedulingGates = built.Spec.SchedulingGates
	return job
}
