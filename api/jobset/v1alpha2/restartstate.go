package v1alpha2

// This file says how a JobSet restarts, from its spec alone. The
// controller decides on it, and inplacectl, which may not import the
// controller, reads it the same way.

// InPlace reports whether the JobSet's restart strategy is InPlaceRestart,
// whether or not in-place restarts are disabled (InPlaceActive).
func InPlace(js *JobSet) bool {
	return js.Spec.FailurePolicy != nil && js.Spec.FailurePolicy.RestartStrategy == InPlaceRestart
}

// InPlaceActive reports whether the JobSet restarts in place: InPlaceRestart
// without upstream JobSet's disable-in-place-restart annotation. A JobSet
// with it still has its broadcast (its agents stand aside), but no agents'
// grants, no epochs decided, and the startup order of any other JobSet.
func InPlaceActive(js *JobSet) bool {
	_, disabled := js.Annotations[DisableInPlaceRestartKey]
	return InPlace(js) && !disabled
}
