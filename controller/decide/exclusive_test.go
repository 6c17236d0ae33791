package decide

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
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
			got := buildJob(js, 1, 1, false, nil).Spec.Template.Spec
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
	cached := buildJob(js, 0, 0, true, nil)
	cached.Spec.Template.Spec.NodeSelector = nil
	cached.Spec.Template.Spec.Tolerations = nil
	got := resumedJob(js, cached, nil)
	if sel := got.Spec.Template.Spec.NodeSelector[jobset.NamespacedJobKey]; sel != "ns_js-workers-0" {
		t.Errorf("node selector %s = %q, want ns_js-workers-0", jobset.NamespacedJobKey, sel)
	}
	if !ptr.Equal(got.Spec.Suspend, ptr.To(false)) || len(got.Spec.Template.Spec.Tolerations) != 1 {
		t.Errorf("resumed Job: suspend %v, tolerations %v", got.Spec.Suspend, got.Spec.Template.Spec.Tolerations)
	}
}

// TestBuildJobPriority: every JobSet's Pods carry the priority the API
// server gives them, and an exclusive Job keeps apart the Pods of its
// priority and those without one, as upstream's Pod webhook has it.
func TestBuildJobPriority(t *testing.T) {
	key := jobKey("ns", "js-workers-1")
	prio := Priorities{"": 0, "high": 1000, "low": -10}
	others := []metav1.LabelSelectorRequirement{
		{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpExists},
		{Key: jobset.JobKey, Operator: metav1.LabelSelectorOpNotIn, Values: []string{key}},
	}
	within := func(p string) [][]metav1.LabelSelectorRequirement {
		return [][]metav1.LabelSelectorRequirement{
			append(slices.Clone(others), metav1.LabelSelectorRequirement{Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpIn, Values: []string{p}}),
			append(slices.Clone(others), metav1.LabelSelectorRequirement{Key: jobset.PriorityKey, Operator: metav1.LabelSelectorOpDoesNotExist}),
		}
	}
	everyOther := [][]metav1.LabelSelectorRequirement{others}
	cases := map[string]struct {
		class     string
		userLabel string
		exclusive map[string]string
		wantLabel string // "" for none
		wantTerms [][]metav1.LabelSelectorRequirement
	}{
		"no class: the default's priority": {wantLabel: "0"},
		"a class":                          {class: "high", wantLabel: "1000"},
		"a class, exclusive: kept apart within its priority and from unlabelled Pods": {
			class: "high", exclusive: map[string]string{jobset.ExclusiveKey: "rack"}, wantLabel: "1000", wantTerms: within("1000"),
		},
		"the template's own label is replaced": {
			class: "high", userLabel: "7", exclusive: map[string]string{jobset.ExclusiveKey: "rack"}, wantLabel: "1000", wantTerms: within("1000"),
		},
		"an unknown class, exclusive: kept apart from every Job, the template's label taken away": {
			class: "missing", userLabel: "1000000", exclusive: map[string]string{jobset.ExclusiveKey: "rack"}, wantTerms: everyOther,
		},
		"a negative priority, no label value for it: kept apart from every Job": {
			class: "low", exclusive: map[string]string{jobset.ExclusiveKey: "rack"}, wantTerms: everyOther,
		},
		"node-selector strategy: not labelled, as upstream": {
			class: "high", exclusive: map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := testJobSet("driver", 1, "workers", 2)
			js.Annotations = tc.exclusive
			tmpl := &js.Spec.ReplicatedJobs[1].Template.Spec.Template
			tmpl.Spec.PriorityClassName = tc.class
			if tc.userLabel != "" {
				tmpl.Labels = map[string]string{jobset.PriorityKey: tc.userLabel}
			}
			pod := buildJob(js, 1, 1, false, prio).Spec.Template
			if got, ok := pod.Labels[jobset.PriorityKey]; got != tc.wantLabel || ok != (tc.wantLabel != "") {
				t.Errorf("label %s = %q (set %v), want %q", jobset.PriorityKey, got, ok, tc.wantLabel)
			}
			var got [][]metav1.LabelSelectorRequirement
			if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					got = append(got, term.LabelSelector.MatchExpressions)
				}
			}
			if diff := cmp.Diff(tc.wantTerms, got); diff != "" {
				t.Errorf("anti-affinity terms (-want +got):\n%s", diff)
			}
		})
	}
	js := testJobSet("driver", 1, "workers", 2)
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "high"
	if got := PriorityClassNames(js); !slices.Equal(got, []string{"high", ""}) {
		t.Errorf("PriorityClassNames = %q, want [high \"\"]", got)
	}
}

func TestDefaultPriority(t *testing.T) {
	class := func(name string, value int32, def bool) schedulingv1.PriorityClass {
		return schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
	}
	for name, tc := range map[string]struct {
		classes []schedulingv1.PriorityClass
		want    int32
	}{
		"none":                      {want: 0},
		"no default":                {classes: []schedulingv1.PriorityClass{class("high", 1000, false)}, want: 0},
		"a default":                 {classes: []schedulingv1.PriorityClass{class("high", 1000, false), class("std", 10, true)}, want: 10},
		"two defaults: the lower":   {classes: []schedulingv1.PriorityClass{class("b", 20, true), class("a", 10, true)}, want: 10},
		"a negative default counts": {classes: []schedulingv1.PriorityClass{class("neg", -5, true)}, want: -5},
	} {
		if got := DefaultPriority(tc.classes); got != tc.want {
			t.Errorf("%s: DefaultPriority = %d, want %d", name, got, tc.want)
		}
	}
}

// TestResumedJobTakesThePriorityLabel: a Job created suspended before its
// Pods were labelled gets the label when it is resumed (a suspended Job's
// Pod labels may change).
func TestResumedJobTakesThePriorityLabel(t *testing.T) {
	js := testJobSet("workers", 1)
	cached := buildJob(js, 0, 0, true, nil)
	got := resumedJob(js, cached, Priorities{"": 5})
	if l := got.Spec.Template.Labels[jobset.PriorityKey]; l != "5" {
		t.Errorf("resumed Job's Pod label %s = %q, want 5", jobset.PriorityKey, l)
	}
}
