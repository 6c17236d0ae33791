package inplace.builtin.failure_policy_test

import data.inplace.builtin.failure_policy

jobset(rules) := {"object": {"spec": {
	"failurePolicy": {"maxRestarts": 3, "rules": rules},
	"replicatedJobs": [{"name": "workers", "replicas": 2}, {"name": "ps", "replicas": 1}],
}}}

test_valid_rules_allowed if {
	count(failure_policy.deny) == 0 with input as jobset([
		{"name": "a", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
		{"name": "b", "action": "RestartJobSet", "targetReplicatedJobs": ["ps"], "onJobFailureMessagePatterns": ["exit code [0-9]+"]},
	])
}

test_unknown_reason_denied if {
	some msg in failure_policy.deny with input as jobset([{"name": "a", "action": "FailJobSet", "onJobFailureReasons": ["OOMKilled"]}])
	contains(msg, "spec.failurePolicy.rules[0].onJobFailureReasons[0] \"OOMKilled\" is not a Job failure reason")
}

test_duplicate_names_denied if {
	some msg in failure_policy.deny with input as jobset([{"name": "a", "action": "FailJobSet"}, {"name": "a", "action": "RestartJobSet"}])
	contains(msg, "spec.failurePolicy.rules[1].name \"a\" is also the name of rules[0]")
}

test_unknown_target_denied if {
	some msg in failure_policy.deny with input as jobset([{"name": "a", "action": "FailJobSet", "targetReplicatedJobs": ["driver"]}])
	contains(msg, "targetReplicatedJobs[0] \"driver\" names no replicated job")
}

test_invalid_pattern_denied if {
	some msg in failure_policy.deny with input as jobset([{"name": "a", "action": "FailJobSet", "onJobFailureMessagePatterns": ["(unclosed"]}])
	contains(msg, "onJobFailureMessagePatterns[0] \"(unclosed\" is not a valid RE2 regular expression")
}

test_restart_job_with_too_many_replicas_denied if {
	big := {"object": {"spec": {"failurePolicy": {"rules": [{"name": "a", "action": "RestartJob"}]}, "replicatedJobs": [{"name": "w", "replicas": 2000}]}}}
	some msg in failure_policy.deny with input as big
	contains(msg, "at most 1024 Jobs")
}

test_catch_all_ignore_max_warned if {
	some msg in failure_policy.warn with input as jobset([{"name": "forever", "action": "RestartJobSetAndIgnoreMaxRestarts"}])
	contains(msg, "rules[0] (forever) restarts on every failure without counting")
}

test_narrowed_ignore_max_not_warned if {
	count(failure_policy.warn) == 0 with input as jobset([{"name": "m", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]}])
}

test_each_duplicate_name_denied_against_the_first if {
	denials := failure_policy.deny with input as jobset([
		{"name": "a", "action": "FailJobSet"},
		{"name": "b", "action": "FailJobSet"},
		{"name": "a", "action": "RestartJobSet"},
		{"name": "a", "action": "RestartJobSet"},
	])
	denials == {
		"spec.failurePolicy.rules[2].name \"a\" is also the name of rules[0]: rule names must be unique",
		"spec.failurePolicy.rules[3].name \"a\" is also the name of rules[0]: rule names must be unique",
	}
}

test_unnamed_rules_allowed if {
	count(failure_policy.deny) == 0 with input as jobset([{"action": "FailJobSet"}, {"action": "RestartJobSet"}])
}

test_too_many_replicas_denied_once_against_the_first_job_restart_rule if {
	big := {"object": {"spec": {
		"failurePolicy": {"rules": [{"name": "a", "action": "FailJobSet"}, {"name": "b", "action": "RestartJobAndIgnoreMaxRestarts"}, {"name": "c", "action": "RestartJob"}]},
		"replicatedJobs": [{"name": "w", "replicas": 2000}],
	}}}
	denials := failure_policy.deny with input as big
	denials == {"spec.failurePolicy.rules[1].action RestartJobAndIgnoreMaxRestarts counts restarts per Job and allows at most 1024 Jobs per replicated job, but spec.replicatedJobs[0] (w) has 2000 replicas: use RestartJobSet, or fewer replicas"}
}
