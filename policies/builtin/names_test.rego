package inplace.builtin.names_test

import data.inplace.builtin.names

rj(name) := {"name": name, "replicas": 5, "template": {"spec": {"parallelism": 3, "completionMode": "Indexed"}}}

jobset(name, rj_name) := {"object": {"metadata": {"name": name}, "spec": {"replicatedJobs": [rj(rj_name)]}}}

with_spec(js, spec) := {"object": {"metadata": js.object.metadata, "spec": object.union(js.object.spec, spec)}}

test_short_names_allowed if {
	count(names.deny) == 0 with input as jobset("train", "workers")
}

test_long_names_denied if {
	some msg in names.deny with input as jobset("different-policies-for-different-replicated-jobs", "paramserver")
	contains(msg, "spec.replicatedJobs[0].name: the Pod hostname \"different-policies-for-different-replicated-jobs-paramserver-4-2\" is 64 characters")
	contains(msg, "by 1")
}

test_hostname_of_63_allowed if {
	# upstream refuses this one (it budgets 6 more characters for the Pod name)
	count(names.deny) == 0 with input as jobset("different-policies-for-different-replicated-jobs", "paramserve")
}

test_long_job_name_denied if {
	some msg in names.deny with input as jobset("different-policies-for-different-replicated-jobs", "parameter-server")
	contains(msg, "spec.replicatedJobs[0].name: the Job name \"different-policies-for-different-replicated-jobs-parameter-server-4\"")
	contains(msg, "is 67 characters, more than the 63 of a DNS label: shorten metadata.name or spec.replicatedJobs[0].name by 4")
}

test_generate_name_budgeted if {
	js := {"object": {"metadata": {"generateName": "different-policies-for-different-replicated-jobs-"}, "spec": {"replicatedJobs": [rj("paramserver")]}}}
	some msg in names.deny with input as js
	contains(msg, "shorten metadata.generateName")
}

test_dotted_jobset_name_denied if {
	some msg in names.deny with input as jobset("train.v2", "workers")
	contains(msg, "metadata.name \"train.v2\" contains '.'")
}

test_jobset_name_starting_with_digit_denied if {
	some msg in names.deny with input as jobset("1train", "workers")
	contains(msg, "metadata.name \"1train\" starts with \"1\"")
}

test_replicated_job_name_characters_denied if {
	some msg in names.deny with input as jobset("train", "Workers_A")
	contains(msg, "spec.replicatedJobs[0].name \"Workers_A\" is part of the names of its Jobs and Pods")
}

test_group_name_denied if {
	js := {"object": {"metadata": {"name": "train"}, "spec": {"replicatedJobs": [object.union(rj("w"), {"groupName": "Group1"})]}}}
	some msg in names.deny with input as js
	contains(msg, "spec.replicatedJobs[0].groupName \"Group1\" must be a DNS-1035 label")
}

test_subdomain_denied if {
	some msg in names.deny with input as with_spec(jobset("train", "w"), {"network": {"subdomain": "my.sub"}})
	contains(msg, "spec.network.subdomain \"my.sub\" must be a DNS-1035 label")
}

test_subdomain_allowed if {
	count(names.deny) == 0 with input as with_spec(jobset("train", "w"), {"network": {"subdomain": "my-sub"}})
}

test_managed_by_denied if {
	some msg in names.deny with input as with_spec(jobset("train", "w"), {"managedBy": "kueue"})
	contains(msg, "spec.managedBy \"kueue\" must be a domain-prefixed path")
}

test_managed_by_allowed if {
	count(names.deny) == 0 with input as with_spec(jobset("train", "w"), {"managedBy": "kueue.x-k8s.io/multikueue"})
}

test_coordinator_label_value_denied if {
	js := with_spec(jobset("a-jobset-name-long-enough-to-overflow", "workers"), {"coordinator": {"replicatedJob": "workers"}})
	some msg in names.deny with input as js
	contains(msg, "spec.coordinator: the coordinator endpoint \"a-jobset-name-long-enough-to-overflow-workers-0-0.a-jobset-name-long-enough-to-overflow\"")
}
