package inplace.builtin.startup_policy_test

import data.inplace.builtin.startup_policy

rjs := [{"name": "init"}, {"name": "main", "dependsOn": [{"name": "init", "status": "Complete"}]}]

test_depends_on_allowed if {
	count(startup_policy.deny) == 0 with input as {"operation": "CREATE", "object": {"spec": {"replicatedJobs": rjs}}}
}

test_in_order_with_depends_on_denied if {
	js := {"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": rjs}}
	some msg in startup_policy.deny with input as {"operation": "CREATE", "object": js}
	contains(msg, "spec.replicatedJobs[1].dependsOn cannot be used with spec.startupPolicy InOrder")
}

test_depends_on_later_job_denied if {
	js := {"spec": {"replicatedJobs": [{"name": "a", "dependsOn": [{"name": "b", "status": "Ready"}]}, {"name": "b"}]}}
	some msg in startup_policy.deny with input as {"operation": "CREATE", "object": js}
	contains(msg, "spec.replicatedJobs[0].dependsOn[0] \"b\" must name a replicated job listed before \"a\"")
}

test_startup_policy_change_denied if {
	old := {"spec": {"startupPolicy": {"startupPolicyOrder": "AnyOrder"}, "replicatedJobs": [{"name": "a"}]}}
	new := {"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [{"name": "a"}]}}
	some msg in startup_policy.deny with input as {"operation": "UPDATE", "object": new, "oldObject": old}
	contains(msg, "spec.startupPolicy is immutable")
}

test_unchanged_update_allowed if {
	js := {"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": [{"name": "a"}]}}
	count(startup_policy.deny) == 0 with input as {"operation": "UPDATE", "object": js, "oldObject": js}
}

test_depends_on_itself_denied if {
	js := {"spec": {"replicatedJobs": [{"name": "a"}, {"name": "b", "dependsOn": [{"name": "a", "status": "Ready"}, {"name": "b", "status": "Ready"}]}]}}
	denials := startup_policy.deny with input as {"operation": "CREATE", "object": js}
	denials == {"spec.replicatedJobs[1].dependsOn[1] \"b\" must name a replicated job listed before \"b\""}
}
