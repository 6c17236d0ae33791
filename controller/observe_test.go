package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// The cache holds only the ConfigMaps the controller owns (the broadcast
// objects, labelled with their JobSet's name), not every ConfigMap of the
// cluster.
func TestCacheSelectsConfigMapsByLabel(t *testing.T) {
	var sel labels.Selector
	for obj, by := range CacheOptions().ByObject {
		if _, ok := obj.(*corev1.ConfigMap); ok {
			sel = by.Label
		}
	}
	if sel == nil {
		t.Fatal("the cache has no label selector for ConfigMaps: it would hold every ConfigMap of the cluster")
	}
	if !sel.Matches(labels.Set{jobset.JobSetNameKey: "train"}) {
		t.Errorf("selector %q does not select a broadcast ConfigMap", sel)
	}
	if sel.Matches(labels.Set{"app": "other"}) {
		t.Errorf("selector %q selects a ConfigMap that is not ours", sel)
	}
}
