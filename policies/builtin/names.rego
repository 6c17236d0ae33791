# Job and Pod names derived from the JobSet must be valid DNS labels: a
# JobSet whose names are too long is admitted by the schema but its Jobs can
# never be created.
package inplace.builtin.names

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	replicas := object.get(rj, "replicas", 1)
	job := sprintf("%s-%s-%d", [input.object.metadata.name, rj.name, max([replicas - 1, 0])])
	completions := object.get(rj.template.spec, "completions", object.get(rj.template.spec, "parallelism", 1))
	pod := sprintf("%s-%d", [job, max([completions - 1, 0])])
	count(pod) > 63
	msg := sprintf("spec.replicatedJobs[%d].name: the Pod hostname %q is %d characters, more than the 63 of a DNS label: shorten metadata.name or spec.replicatedJobs[%d].name by %d", [i, pod, count(pod), i, count(pod) - 63])
}
