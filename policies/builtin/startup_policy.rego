# Constraints of KEP-104: the startup policy is immutable, InOrder and
# dependsOn exclude each other, and a dependency names an earlier
# replicated job.
package inplace.builtin.startup_policy

spec := input.object.spec

deny contains msg if {
	input.operation == "UPDATE"
	object.get(input.oldObject.spec, "startupPolicy", null) != object.get(spec, "startupPolicy", null)
	msg := "spec.startupPolicy is immutable: delete and recreate the JobSet to change it"
}

deny contains msg if {
	input.object.spec.startupPolicy.startupPolicyOrder == "InOrder"
	some i, rj in input.object.spec.replicatedJobs
	count(object.get(rj, "dependsOn", [])) > 0
	msg := sprintf("spec.replicatedJobs[%d].dependsOn cannot be used with spec.startupPolicy InOrder: use one of them", [i])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	some j, dep in rj.dependsOn
	not earlier(dep.name, i)
	msg := sprintf("spec.replicatedJobs[%d].dependsOn[%d] %q must name a replicated job listed before %q", [i, j, dep.name, rj.name])
}

earlier(name, i) if first_job_named[name] < i

# named_jobs are the replicated jobs as [name, index], sorted: the first of
# each name is the one whose predecessor has another name. Looking for
# each dependency among every replicated job was quadratic; sorting is
# n log n, in Go.
named_jobs := sort([[rj.name, i] | some i, rj in input.object.spec.replicatedJobs])

first_job_named := {name: i |
	some k, [name, i] in named_jobs
	not named_jobs[k - 1][0] == name
}
