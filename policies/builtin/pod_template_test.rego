package inplace.builtin.pod_template_test

import data.inplace.builtin.pod_template

jobset(container) := {"object": {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}]}}}

rule(action, operator) := {"action": action, "exitCodes": {"operator": operator, "values": [1]}}

test_valid_rules_allowed if {
	count(pod_template.deny) == 0 with input as jobset({"name": "c", "restartPolicy": "Never", "restartPolicyRules": [rule("RestartAllContainers", "NotIn"), rule("Restart", "In")]})
}

test_restart_pod_denied_with_fix if {
	some msg in pod_template.deny with input as jobset({"name": "c", "restartPolicy": "Never", "restartPolicyRules": [rule("RestartPod", "In")]})
	contains(msg, "spec.replicatedJobs[0].template.spec.template.spec.containers[0].restartPolicyRules[0].action \"RestartPod\" is not a container restart action: use RestartAllContainers")
}

test_terminate_denied_with_fix if {
	some msg in pod_template.deny with input as jobset({"name": "c", "restartPolicy": "Never", "restartPolicyRules": [rule("Terminate", "In")]})
	contains(msg, "\"Terminate\" is not a container restart action: remove the rule")
}

test_no_in_denied_with_fix if {
	some msg in pod_template.deny with input as jobset({"name": "c", "restartPolicy": "Never", "restartPolicyRules": [rule("RestartAllContainers", "NoIn")]})
	contains(msg, "exitCodes.operator \"NoIn\" is not an operator: use NotIn")
}

test_rules_without_restart_policy_denied if {
	some msg in pod_template.deny with input as jobset({"name": "c", "restartPolicyRules": [rule("RestartAllContainers", "NotIn")]})
	contains(msg, "containers[0] (c) has restartPolicyRules but no restartPolicy")
}

pod_failure_policy(rules) := {"object": {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"podFailurePolicy": {"rules": rules}, "template": {"spec": {"containers": [{"name": "c"}]}}}}}]}}}

fail_on(codes) := {"action": "FailJob", "onExitCodes": {"operator": "In", "values": codes}}

test_pod_failure_policy_within_the_job_api_limits_allowed if {
	count(pod_template.deny) == 0 with input as pod_failure_policy([fail_on(numbers.range(1, 255)) | some _ in numbers.range(1, 20)])
}

test_too_many_pod_failure_policy_rules_denied if {
	some msg in pod_template.deny with input as pod_failure_policy([fail_on([1]) | some _ in numbers.range(1, 21)])
	contains(msg, "spec.replicatedJobs[0].template.spec.podFailurePolicy.rules has 21 rules, more than the 20 a Job allows")
}

test_too_many_exit_codes_denied if {
	some msg in pod_template.deny with input as pod_failure_policy([fail_on([1]), fail_on(numbers.range(1, 256))])
	contains(msg, "spec.replicatedJobs[0].template.spec.podFailurePolicy.rules[1].onExitCodes.values has 256 exit codes, more than the 255 a Job allows")
}
