package util

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Conditions are the status conditions of an object of another
// project's API (a Kueue Workload, a Trainer TrainJob), read as
// metav1.Conditions.
func Conditions(obj *unstructured.Unstructured) ([]metav1.Condition, error) {
	raw, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, _ := r.(map[string]any)
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
