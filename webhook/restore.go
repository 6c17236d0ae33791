package webhook

import (
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// Restore is the mutation of an UPDATE. A client that sends a whole
// manifest (kubectl replace, an update from a stale copy) leaves out what
// the webhook added on CREATE: the defaults, the injected agent, the Job
// settings and worker restart rules. Left out, those look like changes of
// immutable fields and the update is refused for fields the client never
// touched. Restore copies each such field the request leaves out from the
// stored JobSet old.
//
// It defaults and injects nothing anew: whatever an update then changes is
// what the client sent, so it can never change what a running JobSet runs
// behind the client's back (an agent rendered from a newer manager
// configuration, say, or defaults of a JobSet admitted before the webhook
// was installed), and the validating webhook decides on that alone.
// Restore is idempotent.
func Restore(js, old *jobset.JobSet) {
	spec, was := &js.Spec, &old.Spec
	if spec.SuccessPolicy == nil {
		spec.SuccessPolicy = was.SuccessPolicy.DeepCopy()
	}
	if spec.StartupPolicy == nil {
		spec.StartupPolicy = was.StartupPolicy.DeepCopy()
	}
	switch {
	case spec.Network == nil:
		spec.Network = was.Network.DeepCopy()
	case was.Network != nil:
		if spec.Network.EnableDNSHostnames == nil {
			spec.Network.EnableDNSHostnames = copyOf(was.Network.EnableDNSHostnames)
		}
		if spec.Network.PublishNotReadyAddresses == nil {
			spec.Network.PublishNotReadyAddresses = copyOf(was.Network.PublishNotReadyAddresses)
		}
	}
	if spec.FailurePolicy != nil && was.FailurePolicy != nil {
		if spec.FailurePolicy.RestartStrategy == "" {
			spec.FailurePolicy.RestartStrategy = was.FailurePolicy.RestartStrategy
		}
		for i := range spec.FailurePolicy.Rules {
			if spec.FailurePolicy.Rules[i].Name == "" && i < len(was.FailurePolicy.Rules) {
				spec.FailurePolicy.Rules[i].Name = was.FailurePolicy.Rules[i].Name
			}
		}
	}
	for i := range spec.VolumeClaimPolicies {
		if i < len(was.VolumeClaimPolicies) && spec.VolumeClaimPolicies[i].RetentionPolicy == nil {
			spec.VolumeClaimPolicies[i].RetentionPolicy = was.VolumeClaimPolicies[i].RetentionPolicy.DeepCopy()
		}
	}

	injected := map[string]bool{}
	if rec := old.Annotations[inject.InjectedAnnotation]; rec != "" {
		if _, ok := js.Annotations[inject.InjectedAnnotation]; !ok {
			if js.Annotations == nil {
				js.Annotations = map[string]string{}
			}
			js.Annotations[inject.InjectedAnnotation] = rec
		}
		for _, k := range strings.Split(rec, ",") {
			injected[k] = true
		}
	}
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		k := slices.IndexFunc(was.ReplicatedJobs, func(o jobset.ReplicatedJob) bool { return o.Name == rj.Name })
		if k < 0 {
			continue
		}
		restoreReplicatedJob(rj, &was.ReplicatedJobs[k], injected)
	}
}

func restoreReplicatedJob(rj, was *jobset.ReplicatedJob, injected map[string]bool) {
	// groupName (and restartStrategy) have schema defaults too, which the
	// API server applies before this webhook sees the request; restoring
	// them keeps Restore whole for a caller that has no schema.
	if rj.GroupName == "" {
		rj.GroupName = was.GroupName
	}
	job, wasJob := &rj.Template.Spec, &was.Template.Spec
	if job.CompletionMode == nil {
		job.CompletionMode = copyOf(wasJob.CompletionMode)
	}
	pod, wasPod := &job.Template.Spec, &wasJob.Template.Spec
	if pod.RestartPolicy == "" {
		pod.RestartPolicy = wasPod.RestartPolicy
	}
	if injected["job-settings:"+rj.Name] {
		if job.BackoffLimit == nil {
			job.BackoffLimit = copyOf(wasJob.BackoffLimit)
		}
		if job.PodReplacementPolicy == nil {
			job.PodReplacementPolicy = copyOf(wasJob.PodReplacementPolicy)
		}
		if job.Completions == nil {
			job.Completions = restoredCompletions(job, wasJob)
		}
	}
	if injected["agent:"+rj.Name] {
		// The stored agent, where it was: not one rendered from today's
		// configuration, which may differ, name included; it is known by
		// the variable the webhook sets on it.
		if a := slices.IndexFunc(wasPod.InitContainers, inject.InjectedAgent); a >= 0 && !inject.HasAgent(pod, wasPod.InitContainers[a].Name) {
			at := min(a, len(pod.InitContainers))
			pod.InitContainers = slices.Insert(pod.InitContainers, at, *wasPod.InitContainers[a].DeepCopy())
			// And the volumes it mounts: its report token, its state.
			for _, v := range wasPod.Volumes {
				if (v.Name == inject.ReportTokenVolume || v.Name == inject.AgentStateVolume) && !slices.ContainsFunc(pod.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name }) {
					pod.Volumes = append(pod.Volumes, *v.DeepCopy())
				}
			}
		}
	}
	for c := range pod.Containers {
		ctr := &pod.Containers[c]
		if !injected["worker-restart-rules:"+rj.Name+"/"+ctr.Name] || ctr.RestartPolicy != nil || len(ctr.RestartPolicyRules) > 0 {
			continue
		}
		if w := slices.IndexFunc(wasPod.Containers, func(o corev1.Container) bool { return o.Name == ctr.Name }); w >= 0 {
			ctr.RestartPolicy = copyOf(wasPod.Containers[w].RestartPolicy)
			for _, r := range wasPod.Containers[w].RestartPolicyRules {
				ctr.RestartPolicyRules = append(ctr.RestartPolicyRules, *r.DeepCopy())
			}
		}
	}
}

// restoredCompletions is the completions a request that leaves them out
// gets back. Injection set them equal to parallelism (InPlaceRestart needs
// that); a request that scales parallelism (an elastic replicated job)
// keeps the relation, not the stored number, which would undo the scale
// and be refused as completions other than parallelism.
func restoredCompletions(job, was *batchv1.JobSpec) *int32 {
	if job.Parallelism != nil && was.Parallelism != nil && was.Completions != nil && *was.Completions == *was.Parallelism {
		return copyOf(job.Parallelism)
	}
	return copyOf(was.Completions)
}

func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
