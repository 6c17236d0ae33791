# Fields that name another part of the JobSet must name one that exists,
# as upstream JobSet's webhook requires: the success policy's targets, and
# the coordinator's replicated job, Job and Pod. And a replicated job's
# Pods must be countable in an int32.
package inplace.builtin.references

max_int32 := 2147483647

spec := input.object.spec

replicated_jobs := object.get(spec, "replicatedJobs", [])

names := {rj.name | some rj in replicated_jobs}

by_name := {rj.name: rj | some rj in replicated_jobs}

# The rules every JobSet goes through read the input directly: a helper rule
# or object.get in between costs each an evaluation step.

deny contains msg if {
	some i, target in input.object.spec.successPolicy.targetReplicatedJobs
	not target in names
	msg := sprintf("spec.successPolicy.targetReplicatedJobs[%d] %q names no replicated job: use one of %v", [i, target, sort(names)])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	replicas := object.get(rj, "replicas", 1)
	parallelism := object.get(rj.template.spec, "parallelism", 1)
	replicas * parallelism > max_int32
	msg := sprintf("spec.replicatedJobs[%d] (%s): replicas (%d) times template.spec.parallelism (%d) must not exceed %d: lower one of them", [i, rj.name, replicas, parallelism, max_int32])
}

coordinator := spec.coordinator

deny contains msg if {
	coordinator
	not coordinator.replicatedJob in names
	msg := sprintf("spec.coordinator.replicatedJob %q names no replicated job: use one of %v", [coordinator.replicatedJob, sort(names)])
}

deny contains msg if {
	rj := by_name[coordinator.replicatedJob]
	replicas := object.get(rj, "replicas", 1)
	index := object.get(coordinator, "jobIndex", 0)
	index >= replicas
	msg := sprintf("spec.coordinator.jobIndex %d is out of range: replicated job %s has %d Jobs (indexes 0 to %d)", [index, rj.name, replicas, replicas - 1])
}

deny contains msg if {
	rj := by_name[coordinator.replicatedJob]
	not indexed_with_completions(rj)
	msg := sprintf("spec.coordinator.replicatedJob %s must have Indexed Jobs with completions set, so that its Pods have stable indexes: set spec.replicatedJobs[name=%s].template.spec.completions (and leave completionMode Indexed)", [rj.name, rj.name])
}

deny contains msg if {
	rj := by_name[coordinator.replicatedJob]
	indexed_with_completions(rj)
	completions := rj.template.spec.completions
	index := object.get(coordinator, "podIndex", 0)
	index >= completions
	msg := sprintf("spec.coordinator.podIndex %d is out of range: the Jobs of replicated job %s have %d completions (indexes 0 to %d)", [index, rj.name, completions, completions - 1])
}

indexed_with_completions(rj) if {
	object.get(rj.template.spec, "completionMode", "") == "Indexed"
	rj.template.spec.completions != null
}
