# A platform guardrail: no JobSet may ask for more restarts than the
# cluster allows. The limit is a parameter of the JobSetPolicy.
package guardrails.max_restarts

deny contains msg if {
	got := input.object.spec.failurePolicy.maxRestarts
	got > input.parameters.limit
	msg := sprintf("spec.failurePolicy.maxRestarts is %d, above this cluster's limit of %d: lower it", [got, input.parameters.limit])
}
