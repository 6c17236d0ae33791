# Pod template problems that would otherwise surface only when the Job
# controller fails to create Pods: container restart rules with actions or
# operators Kubernetes does not have (the KEPs' RestartPod, Terminate and
# NoIn among them), and rules on a container without its own restartPolicy.
package inplace.builtin.pod_template

actions := {"Restart", "RestartAllContainers"}

operators := {"In", "NotIn"}

action_fix := {
	"RestartPod": "use RestartAllContainers, the Kubernetes name of that action",
	"Terminate": "remove the rule: an exit that matches no rule falls back to the container's restartPolicy",
}

operator_fix := {"NoIn": "use NotIn"}

# containers with restart rules, and their paths; the path is built only for
# those, which are few.
containers contains [path, c] if {
	some i, rj in input.object.spec.replicatedJobs
	some kind in ["initContainers", "containers"]
	some j, c in object.get(rj.template.spec.template.spec, kind, [])
	c.restartPolicyRules
	path := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.%s[%d]", [i, kind, j])
}

deny contains msg if {
	some [path, c] in containers
	some k, rule in c.restartPolicyRules
	not rule.action in actions
	fix := object.get(action_fix, rule.action, "use Restart or RestartAllContainers")
	msg := sprintf("%s.restartPolicyRules[%d].action %q is not a container restart action: %s", [path, k, rule.action, fix])
}

deny contains msg if {
	some [path, c] in containers
	some k, rule in c.restartPolicyRules
	op := rule.exitCodes.operator
	not op in operators
	fix := object.get(operator_fix, op, "use In or NotIn")
	msg := sprintf("%s.restartPolicyRules[%d].exitCodes.operator %q is not an operator: %s", [path, k, op, fix])
}

deny contains msg if {
	some [path, c] in containers
	count(c.restartPolicyRules) > 0
	not c.restartPolicy
	msg := sprintf("%s (%s) has restartPolicyRules but no restartPolicy: set restartPolicy on the container (Never for a worker, Always for a sidecar); the rules apply only to a container with its own restartPolicy", [path, c.name])
}
