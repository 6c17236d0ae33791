// Package v1alpha1 holds the policy API, policy.inplace.dev/v1alpha1: the
// cluster-scoped JobSetPolicy, a Rego policy that cluster admins apply to
// JobSets at admission and in a periodic audit.
//
// +kubebuilder:object:generate=true
// +groupName=policy.inplace.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the policy API.
	GroupVersion = schema.GroupVersion{Group: "policy.inplace.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
