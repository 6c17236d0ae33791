// Package v1alpha2 holds the JobSet API, jobset.x-k8s.io/v1alpha2.
//
// The types accept every manifest written for upstream JobSet v1alpha2 and add
// the epoch fields of the in-place restart protocol (status.deprecatedEpoch and
// status.syncedEpoch). Field names, JSON tags, defaults and reserved labels are
// kept identical to upstream so that existing manifests and tools keep working.
//
// Imports: API types (k8s.io/api, apimachinery) and api/protocol, which
// imports the standard library alone, for the epoch (protocol.Epoch) that
// status.syncedEpoch and status.deprecatedEpoch hold and upstream's
// in-place restart attempts stand for. It never imports a client,
// controller-runtime or any other package of this module: everything else
// imports it, and so may any program that writes JobSets.
//
// +kubebuilder:object:generate=true
// +groupName=jobset.x-k8s.io
package v1alpha2
