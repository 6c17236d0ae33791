# Accelerator time is expensive: a JobSet whose workers request GPUs should
# recover in place. This one warns (or, as a JobSetPolicy with
# enforcementAction Deny, rejects) and labels such JobSets for the cost
# dashboards.
package guardrails.accelerators

gpu_requested if {
	some rj in input.object.spec.replicatedJobs
	some c in rj.template.spec.template.spec.containers
	object.get(c, ["resources", "limits", "nvidia.com/gpu"], null) != null
}

in_place if input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"

warn contains msg if {
	gpu_requested
	not in_place
	msg := "spec.failurePolicy.restartStrategy: this JobSet requests GPUs; set restartStrategy: InPlaceRestart to recover from a failure in seconds instead of minutes"
}

patch contains {"op": "add", "path": "/metadata/labels/inplace.dev~1accelerators", "value": "gpu"} if {
	gpu_requested
	object.get(input.object.metadata, ["labels", "inplace.dev/accelerators"], "") != "gpu"
}
