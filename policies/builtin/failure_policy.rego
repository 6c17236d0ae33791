# Constraints of KEP-262 that the schema cannot express: rule names are
# unique, reasons are Job failure reasons, targets exist, patterns compile,
# and rules that can never stop a JobSet are called out.
package inplace.builtin.failure_policy

# The rules iterate input.object.spec.failurePolicy.rules and their lists
# directly: a missing list is iterated as an empty one, and a helper rule or
# object.get in between costs every JobSet an evaluation step per rule.

job_failure_reasons := {"PodFailurePolicy", "BackoffLimitExceeded", "DeadlineExceeded", "MaxFailedIndexesExceeded", "FailedIndexes"}

replicated_jobs := {rj.name | some rj in input.object.spec.replicatedJobs}

deny contains msg if {
	some i, rule in input.object.spec.failurePolicy.rules
	some j, reason in rule.onJobFailureReasons
	not reason in job_failure_reasons
	msg := sprintf("spec.failurePolicy.rules[%d].onJobFailureReasons[%d] %q is not a Job failure reason: use one of %v", [i, j, reason, sort(job_failure_reasons)])
}

# named_rules are the named rules as [name, index], sorted: the rules of
# one name are next to each other, the first of them first. Comparing every
# pair of rules instead took 5 s for 4,000 rules; sorting is n log n, in Go.
named_rules := sort([[rule.name, i] | some i, rule in input.object.spec.failurePolicy.rules])

first_rule_named := {name: i |
	some k, [name, i] in named_rules
	not same_name_as_previous(named_rules, k)
}

same_name_as_previous(sorted, k) if sorted[k - 1][0] == sorted[k][0]

deny contains msg if {
	some k, [name, j] in named_rules
	same_name_as_previous(named_rules, k)
	msg := sprintf("spec.failurePolicy.rules[%d].name %q is also the name of rules[%d]: rule names must be unique", [j, name, first_rule_named[name]])
}

deny contains msg if {
	some i, rule in input.object.spec.failurePolicy.rules
	some j, target in rule.targetReplicatedJobs
	not target in replicated_jobs
	msg := sprintf("spec.failurePolicy.rules[%d].targetReplicatedJobs[%d] %q names no replicated job: use one of %v", [i, j, target, sort(replicated_jobs)])
}

deny contains msg if {
	some i, rule in input.object.spec.failurePolicy.rules
	some j, pattern in rule.onJobFailureMessagePatterns
	not regex.is_valid(pattern)
	msg := sprintf("spec.failurePolicy.rules[%d].onJobFailureMessagePatterns[%d] %q is not a valid RE2 regular expression", [i, j, pattern])
}

# Each replicated job with too many replicas is reported once, against the
# first rule that restarts single Jobs: the rules and the replicated jobs
# are each walked once, not their product.
first_job_restart_rule := min({i |
	some i, rule in input.object.spec.failurePolicy.rules
	rule.action in {"RestartJob", "RestartJobAndIgnoreMaxRestarts"}
})

deny contains msg if {
	i := first_job_restart_rule
	some k, rj in input.object.spec.replicatedJobs
	object.get(rj, "replicas", 1) > 1024
	msg := sprintf("spec.failurePolicy.rules[%d].action %s counts restarts per Job and allows at most 1024 Jobs per replicated job, but spec.replicatedJobs[%d] (%s) has %d replicas: use RestartJobSet, or fewer replicas", [i, input.object.spec.failurePolicy.rules[i].action, k, rj.name, rj.replicas])
}

warn contains msg if {
	some i, rule in input.object.spec.failurePolicy.rules
	rule.action == "RestartJobSetAndIgnoreMaxRestarts"
	count(object.get(rule, "onJobFailureReasons", [])) == 0
	count(object.get(rule, "onJobFailureMessagePatterns", [])) == 0
	count(object.get(rule, "targetReplicatedJobs", [])) == 0
	msg := sprintf("spec.failurePolicy.rules[%d] (%s) restarts on every failure without counting: the JobSet never stops on a persistent bug and later rules never apply; narrow it with onJobFailureReasons, onJobFailureMessagePatterns or targetReplicatedJobs", [i, object.get(rule, "name", "unnamed")])
}
