# Pod template problems that would otherwise surface only when the Job
# controller fails to create Pods: container restart rules with actions or
# operators Kubernetes does not have (the KEPs' RestartPod, Terminate and
# NoIn among them), and rules on a container without its own restartPolicy.
# And a podFailurePolicy beyond the Job API's limits, which would surface
# only when the JobSet's controller fails to create the Jobs.
package inplace.builtin.pod_template

actions := {"Restart", "RestartAllContainers"}

operators := {"In", "NotIn"}

action_fix := {
	"RestartPod": "use RestartAllContainers, the Kubernetes name of that action",
	"Terminate": "remove the rule: an exit that matches no rule falls back to the container's restartPolicy",
}

operator_fix := {"NoIn": "use NotIn"}

# Each rule iterates the containers itself rather than through a shared
# helper set: a helper's set is built and hashed on every evaluation, and
# the path is written only for a container found wrong.
deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	some kind in ["initContainers", "containers"]
	some j, c in rj.template.spec.template.spec[kind]
	some k, rule in c.restartPolicyRules
	not rule.action in actions
	fix := object.get(action_fix, rule.action, "use Restart or RestartAllContainers")
	msg := sprintf("%s.restartPolicyRules[%d].action %q is not a container restart action: %s", [path(i, kind, j), k, rule.action, fix])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	some kind in ["initContainers", "containers"]
	some j, c in rj.template.spec.template.spec[kind]
	some k, rule in c.restartPolicyRules
	op := rule.exitCodes.operator
	not op in operators
	fix := object.get(operator_fix, op, "use In or NotIn")
	msg := sprintf("%s.restartPolicyRules[%d].exitCodes.operator %q is not an operator: %s", [path(i, kind, j), k, op, fix])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	some kind in ["initContainers", "containers"]
	some j, c in rj.template.spec.template.spec[kind]
	count(c.restartPolicyRules) > 0
	not c.restartPolicy
	msg := sprintf("%s (%s) has restartPolicyRules but no restartPolicy: set restartPolicy on the container (Never for a worker, Always for a sidecar); the rules apply only to a container with its own restartPolicy", [path(i, kind, j), c.name])
}

path(i, kind, j) := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.%s[%d]", [i, kind, j])

# The Job API's limits on a podFailurePolicy. inplace_restart reads a
# policy's exit codes only within them: the reading's cost grows with the
# rules times their codes.
max_pod_failure_policy_rules := 20

max_exit_codes := 255

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	n := count(rj.template.spec.podFailurePolicy.rules)
	n > max_pod_failure_policy_rules
	msg := sprintf("spec.replicatedJobs[%d].template.spec.podFailurePolicy.rules has %d rules, more than the %d a Job allows: its Jobs could never be created; merge or remove rules", [i, n, max_pod_failure_policy_rules])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	some k, rule in rj.template.spec.podFailurePolicy.rules
	n := count(rule.onExitCodes.values)
	n > max_exit_codes
	msg := sprintf("spec.replicatedJobs[%d].template.spec.podFailurePolicy.rules[%d].onExitCodes.values has %d exit codes, more than the %d a Job allows: its Jobs could never be created; use operator NotIn with the codes that are not meant, or fewer codes", [i, k, n, max_exit_codes])
}
