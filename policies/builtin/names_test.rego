package inplace.builtin.names_test

import data.inplace.builtin.names

jobset(name, rj) := {"object": {"metadata": {"name": name}, "spec": {"replicatedJobs": [{"name": rj, "replicas": 5, "template": {"spec": {"parallelism": 3}}}]}}}

test_short_names_allowed if {
	count(names.deny) == 0 with input as jobset("train", "workers")
}

test_long_names_denied if {
	some msg in names.deny with input as jobset("different-policies-for-different-replicated-jobs", "parameter-server")
	contains(msg, "spec.replicatedJobs[0].name: the Pod hostname \"different-policies-for-different-replicated-jobs-parameter-server-4-2\" is 69 characters")
	contains(msg, "by 6")
}
