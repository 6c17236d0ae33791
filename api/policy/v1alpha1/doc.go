// Package v1alpha1 holds the policy API, policy.inplace.dev/v1alpha1: the
// cluster-scoped JobSetPolicy, a Rego policy that cluster admins apply to
// JobSets at admission and in a periodic audit.
//
// Imports: API types (apimachinery) only; never a client,
// controller-runtime or any other package of this module.
//
// +kubebuilder:object:generate=true
// +groupName=policy.inplace.dev
package v1alpha1
