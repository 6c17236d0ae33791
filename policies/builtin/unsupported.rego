# Fields of the upstream JobSet API that inplace admits as upstream does
# but does not act on yet: called out, never silently ignored.
package inplace.builtin.unsupported

warn contains msg if {
	some key in ["alpha.jobset.sigs.k8s.io/exclusive-topology", "alpha.jobset.sigs.k8s.io/node-selector"]
	input.object.metadata.annotations[key] != null
	msg := sprintf("metadata.annotations[%q]: exclusive placement is not supported by this JobSet controller yet; the annotation has no effect", [key])
}
