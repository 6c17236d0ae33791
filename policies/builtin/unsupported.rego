# Fields of the upstream JobSet API that inplace accepts in its schema but
# does not implement yet: rejected or called out, never silently ignored.
package inplace.builtin.unsupported

deny contains "spec.volumeClaimPolicies is not supported by this JobSet controller yet: create the PersistentVolumeClaims yourself and reference them from the Pod template" if {
	count(object.get(input.object.spec, "volumeClaimPolicies", [])) > 0
}

warn contains msg if {
	some key in ["alpha.jobset.sigs.k8s.io/exclusive-topology", "alpha.jobset.sigs.k8s.io/node-selector"]
	object.get(input.object.metadata, ["annotations", key], null) != null
	msg := sprintf("metadata.annotations[%q]: exclusive placement is not supported by this JobSet controller yet; the annotation has no effect", [key])
}
