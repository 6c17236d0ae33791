package guardrails.max_restarts_test

import data.guardrails.max_restarts

jobset(n) := {"object": {"spec": {"failurePolicy": {"maxRestarts": n}}}, "parameters": {"limit": 10}}

test_at_limit_allowed if {
	count(max_restarts.deny) == 0 with input as jobset(10)
}

test_above_limit_denied if {
	some msg in max_restarts.deny with input as jobset(11)
	contains(msg, "maxRestarts is 11, above this cluster's limit of 10")
}

test_no_failure_policy_allowed if {
	count(max_restarts.deny) == 0 with input as {"object": {"spec": {}}, "parameters": {"limit": 10}}
}
