package decide

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"

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

// DefaultPriority is the priority the API server gives a Pod that names
// no PriorityClass, as its Priority admission plugin picks it: the value
// of the globalDefault class, the lowest of them when a race left several,
// or 0 when there is none.
func DefaultPriority(classes []schedulingv1.PriorityClass) int32 {
	var value int32
	found := false
	for _, pc := range classes {
		if pc.GlobalDefault && (!found || pc.Value < value) {
			value, found = pc.Value, true
		}
	}
	return value
}

// addPriority labels the Pods of rj with the priority the API server
// gives them (jobset.PriorityKey), as upstream JobSet's Pod webhook
// labels every JobSet's Pods, and returns the label's value: exclusive
// placement by Pod affinities keeps a Job apart from the Pods of other
// Jobs of its priority (addExclusivePlacement), so that a JobSet of a
// higher priority is not kept off a domain by the Pods of a lower one and
// can preempt them. Not with exclusive placement by node selectors, which
// keeps Jobs apart by the nodes' labels, as upstream leaves those Pods
// unlabelled too. When the priority is unknown, or negative (no label
// value starts with '-'), it returns "" and takes away a label the
// template set: those Pods are kept apart from every other Job's.
func addPriority(js *jobset.JobSet, rj *jobset.ReplicatedJob, pod *corev1.PodTemplateSpec, prio Priorities) string {
	if nodeSelectorStrategy(js, rj) {
		return ""
	}
	v, ok := prio[pod.Spec.PriorityClassName]
	if !ok || v < 0 {
		delete(pod.Labels, jobset.PriorityKey)
		return ""
	}
	value := strconv.Itoa(int(v))
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[jobset.PriorityKey] = value
	return value
}

// nodeSelectorStrategy says whether rj's exclusive placement, if any, is
// by node selectors (the annotation on the JobSet or on its template).
func nodeSelectorStrategy(js *jobset.JobSet, rj *jobset.ReplicatedJob) bool {
	_, onJobSet := js.Annotations[jobset.NodeSelectorStrategyKey]
	_, onTemplate := rj.Template.Annotations[jobset.NodeSelectorStrategyKey]
	return onJobSet || onTemplate
}
