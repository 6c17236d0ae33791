// Package v1alpha2 holds the JobSet API, jobset.x-k8s.io/v1alpha2.
//
// The types accept every manifest written for upstream JobSet v1alpha2 and add
// the epoch fields of the in-place restart protocol (status.deprecatedEpoch and
// status.syncedEpoch). Field names, JSON tags, defaults and reserved labels are
// kept identical to upstream so that existing manifests and tools keep working.
//
// +kubebuilder:object:generate=true
// +groupName=jobset.x-k8s.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the JobSet API.
	GroupVersion = schema.GroupVersion{Group: "jobset.x-k8s.io", Version: "v1alpha2"}

	// SchemeBuilder registers the JobSet types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the JobSet types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind is the kind of the JobSet object.
const Kind = "JobSet"
