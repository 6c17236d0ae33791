package decide

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

func TestBuildJobExclusivePlacement(t *testing.T) {
	key := jobKey("ns", "js-workers-1")
	allNamespaces := &metav1.LabelSelector{}
	byAffinity := func(topology string) *corev1.Affinity {
		return &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpIn, Values: []string{key}},
				}},
				TopologyKey:       topology,
				NamespaceSelector: allNamespaces,
			}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpExists},
					{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpNotIn, Values: []string{key}},
				}},
				TopologyKey:       topology,
				NamespaceSelector: allNamespaces,
			}}},
		}
	}
	bySelector := corev1.PodSpec{
		NodeSelector: map[string]string{"pool": "a", jobset.NamespacedJobKey: "ns_js-workers-1"},
		Tolerations:  []corev1.Toleration{{Key: jobset.NoScheduleTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	cases := map[string]struct {
		jobSet, template map[string]string // annotations
		want             corev1.PodSpec
	}{
		"none": {
			want: corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}},
		},
		"on the JobSet": {
			jobSet: map[string]string{jobset.ExclusiveKey: "rack"},
			want:   corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}, Affinity: byAffinity("rack")},
		},
		"on the replicated job's template": {
			template: map[string]string{jobset.ExclusiveKey: "zone"},
			want:     corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}, Affinity: byAffinity("zone")},
		},
		"the JobSet's first": {
			jobSet:   map[string]string{jobset.ExclusiveKey: "rack"},
			template: map[string]string{jobset.ExclusiveKey: "zone"},
			want:     corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}, Affinity: byAffinity("rack")},
		},
		"node-selector strategy": {
			jobSet: map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"},
			want:   bySelector,
		},
		"node-selector strategy without a topology does nothing": {
			jobSet: map[string]string{jobset.NodeSelectorStrategyKey: "true"},
			want:   corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := testJobSet("driver", 1, "workers", 2)
			js.Annotations = tc.jobSet
			js.Spec.ReplicatedJobs[1].Template.Annotations = tc.template
			js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
			got := buildJob(js, 1, 1, false).Spec.Template.Spec
			got.Containers, got.Subdomain, got.RestartPolicy = nil, "", ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Pod spec (-want +got):\n%s", diff)
			}
			if tc.want.Affinity == nil && js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Affinity != nil {
				t.Error("the template was changed")
			}
		})
	}
}

// TestResumedJobKeepsExclusivePlacement: a queueing controller's resume
// replaces the Pods' node selector and tolerations by the template's,
// which must keep the node-selector strategy's own.
func TestResumedJobKeepsExclusivePlacement(t *testing.T) {
	js := testJobSet("workers", 1)
	js.Annotations = map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"}
	cached := buildJob(js, 0, 0, true)
	cached.Spec.Template.Spec.NodeSelector = nil
	cached.Spec.Template.Spec.Tolerations = nil
	got := resumedJob(js, cached)
	if sel := got.Spec.Template.Spec.NodeSelector[jobset.NamespacedJobKey]; sel != "ns_js-workers-0" {
		t.Errorf("node selector %s = %q, want ns_js-workers-0", jobset.NamespacedJobKey, sel)
	}
	if !ptr.Equal(got.Spec.Suspend, ptr.To(false)) || len(got.Spec.Template.Spec.Tolerations) != 1 {
		t.Errorf("resumed Job: suspend %v, tolerations %v", got.Spec.Suspend, got.Spec.Template.Spec.Tolerations)
	}
}
