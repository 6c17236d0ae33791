// Package params checks a JobSetPolicy's parameters against its
// parametersSchema, as the apiserver checks a custom resource against its
// CRD's schema: the same structural rules, the same validation, the same
// errors with the field's path. A typo in a parameter is refused when the
// policy is written instead of silently disabling its guardrail.
package params
