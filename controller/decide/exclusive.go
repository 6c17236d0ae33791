package decide

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// exclusiveTopology is the node label whose domains each run the Pods of
// one Job at most (upstream's exclusive placement), from the JobSet's
// annotation or else the replicated Job's template's; "" for none.
func exclusiveTopology(js *jobset.JobSet, rj *jobset.ReplicatedJob) string {
	if t, ok := js.Annotations[jobset.ExclusiveKey]; ok {
		return t
	}
	return rj.Template.Annotations[jobset.ExclusiveKey]
}

// addExclusivePlacement makes job's Pods exclusive to a topology domain,
// as upstream JobSet does. By default with Pod affinities: every Pod of
// the Job in the domain of the others (same job key), in any namespace,
// and none of another Job's of the same priority (addPriority labelled
// them with it) nor of another Job's without a priority label (made before
// Pods were labelled, or of unknown priority) in it. With priority "",
// none of any other Job's. With the node-selector strategy the nodes are
// already labelled for each Job (NamespacedJobKey) and tainted
// (NoScheduleTaintKey) by the cluster's admin: a node selector and a
// toleration place the Pods there. The Pods' scheduling directives are
// the template's plus these, which also come back when a queueing
// controller resumes the Job (resumedJob rebuilds them).
func addExclusivePlacement(js *jobset.JobSet, rj *jobset.ReplicatedJob, job *batchv1.Job, priority string) {
	topology := exclusiveTopology(js, rj)
	if topology == "" {
		return
	}
	pod := &job.Spec.Template.Spec
	if nodeSelectorStrategy(js, rj) {
		if pod.NodeSelector == nil {
			pod.NodeSelector = map[string]string{}
		}
		pod.NodeSelector[jobset.NamespacedJobKey] = job.Namespace + "_" + job.Name
		pod.Tolerations = append(pod.Tolerations, corev1.Toleration{
			Key:      jobset.NoScheduleTaintKey,
			Operator: corev1.TolerationOpExists,
			Effect:   corev1.TaintEffectNoSchedule,
		})
		return
	}
	key := job.Labels[jobset.JobKey]
	allNamespaces := &metav1.LabelSelector{}
	if pod.Affinity == nil {
		pod.Affinity = &corev1.Affinity{}
	}
	if pod.Affinity.PodAffinity == nil {
		pod.Affinity.PodAffinity = &corev1.PodAffinity{}
	}
	if pod.Affinity.PodAntiAffinity == nil {
		pod.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	pod.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpIn, Values: []string{key}},
		}},
		TopologyKey:       topology,
		NamespaceSelector: allNamespaces,
	})
	repel := func(extra ...metav1.LabelSelectorRequirement) {
		pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: append([]metav1.LabelSelectorRequirement{
				{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpExists},
				{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpNotIn, Values: []string{key}},
			}, extra...)},
			TopologyKey:       topology,
			NamespaceSelector: allNamespaces,
		})
	}
	if priority == "" {
		repel()
		return
	}
	// Within its priority, as upstream; and, unlike upstream, whose Pod
	// webhook labels every JobSet Pod it admits, away from the Pods that
	// carry no priority: those of Jobs made before the label, which would
	// otherwise lose their exclusivity on an upgrade.
	repel(metav1.LabelSelectorRequirement{Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpIn, Values: []string{priority}})
	repel(metav1.LabelSelectorRequirement{Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpDoesNotExist})
}
