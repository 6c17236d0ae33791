// Package v1alpha1 is the configuration file of inplace-manager,
// config.inplace.dev/v1alpha1, kind Configuration.
//
// Every field is optional; Load fills in defaults. Unknown fields are an
// error, so that a typo does not silently fall back to a default.
//
// Imports: API types only (k8s.io/api, apimachinery). It never imports a
// client or any other package of this module.
package v1alpha1
