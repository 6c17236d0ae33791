package decide

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Priorities are the values of the PriorityClasses a JobSet's Pod
// templates name, by name; under "" the value of a Pod that names none:
// the cluster's default class's (globalDefault), or 0. A name not in it
// is not known (no such class: the API server refuses its Pods anyway).
type Priorities map[string]int32

// PriorityClassNames are the priorityClassNames of js's Pod templates
// whose Pods are labelled with their priority (addPriority), each once;
// "" for templates that name none.
func PriorityClassNames(js *jobset.JobSet) []string {
	var out []string
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if nodeSelectorStrategy(js, rj) {
			continue
		}
		if name := rj.Template.Spec.Template.Spec.PriorityClassName; !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// addPriority labels the Pods of rj with the priority the API server
// gives them (jobset.PriorityKey), as upstream JobSet's Pod webhook
// labels every JobSet's Pods: exclusive placement by Pod affinities keeps
// a Job apart from the Pods of other Jobs of its priority only
// (addExclusivePlacement), so that a JobSet of a higher priority is not
// kept off a domain by the Pods of a lower one and can preempt them. Not
// with exclusive placement by node selectors, which keeps Jobs apart by
// the nodes' labels, as upstream leaves those Pods unlabelled too; not
// when the priority is unknown, nor when it is negative (no label value
// starts with '-'): such Pods are kept apart from every other Job's.
func addPriority(js *jobset.JobSet, rj *jobset.ReplicatedJob, pod *corev1.PodTemplateSpec, prio Priorities) {
	if nodeSelectorStrategy(js, rj) {
		return
	}
	v, ok := prio[pod.Spec.PriorityClassName]
	if !ok {
		return
	}
	value := strconv.Itoa(int(v))
	if len(validation.IsValidLabelValue(value)) > 0 {
		return
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[jobset.PriorityKey] = value
}

// nodeSelectorStrategy says whether rj's exclusive placement, if any, is
// by node selectors (the annotation on the JobSet or on its template).
func nodeSelectorStrategy(js *jobset.JobSet, rj *jobset.ReplicatedJob) bool {
	_, onJobSet := js.Annotations[jobset.NodeSelectorStrategyKey]
	_, onTemplate := rj.Template.Annotations[jobset.NodeSelectorStrategyKey]
	return onJobSet || onTemplate
}
