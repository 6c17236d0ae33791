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
