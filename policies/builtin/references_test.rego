package inplace.builtin.references_test

import data.inplace.builtin.references

rj(name, spec) := {"name": name, "replicas": 2, "template": {"spec": spec}}

indexed := {"completionMode": "Indexed", "completions": 4, "parallelism": 4}

jobset(spec) := {"object": {"spec": object.union({"replicatedJobs": [rj("driver", indexed), rj("workers", {"parallelism": 2})]}, spec)}}

test_valid_references_allowed if {
	count(references.deny) == 0 with input as jobset({
		"successPolicy": {"operator": "All", "targetReplicatedJobs": ["driver"]},
		"coordinator": {"replicatedJob": "driver", "jobIndex": 1, "podIndex": 3},
	})
}

test_success_target_denied if {
	some msg in references.deny with input as jobset({"successPolicy": {"operator": "All", "targetReplicatedJobs": ["leader"]}})
	contains(msg, "spec.successPolicy.targetReplicatedJobs[0] \"leader\" names no replicated job")
}

test_coordinator_unknown_denied if {
	some msg in references.deny with input as jobset({"coordinator": {"replicatedJob": "leader"}})
	contains(msg, "spec.coordinator.replicatedJob \"leader\" names no replicated job")
}

test_coordinator_job_index_denied if {
	some msg in references.deny with input as jobset({"coordinator": {"replicatedJob": "driver", "jobIndex": 2}})
	contains(msg, "spec.coordinator.jobIndex 2 is out of range")
}

test_coordinator_pod_index_denied if {
	some msg in references.deny with input as jobset({"coordinator": {"replicatedJob": "driver", "podIndex": 4}})
	contains(msg, "spec.coordinator.podIndex 4 is out of range")
}

test_coordinator_without_completions_denied if {
	some msg in references.deny with input as jobset({"coordinator": {"replicatedJob": "workers"}})
	contains(msg, "spec.coordinator.replicatedJob workers must have Indexed Jobs with completions set")
}

test_too_many_pods_denied if {
	js := {"object": {"spec": {"replicatedJobs": [{"name": "w", "replicas": 65536, "template": {"spec": {"parallelism": 65536}}}]}}}
	some msg in references.deny with input as js
	contains(msg, "spec.replicatedJobs[0] (w): replicas (65536) times template.spec.parallelism (65536) must not exceed 2147483647")
}
