# What restartStrategy InPlaceRestart needs (the in-place restart KEP's
# webhook rules): Jobs that never fail because of a Pod, replacement Pods
# only once the old one has failed, every worker running at once, an
# agent sidecar in every Pod, and worker restart rules that leave the exit
# codes the podFailurePolicy fails the Job on to the Job.
package inplace.builtin.inplace_restart

max_int32 := 2147483647

# Every rule tests the restart strategy first, on the input itself rather
# than through a helper rule: OPA indexes rules on such a comparison, so a
# JobSet that restarts by recreating skips them all unevaluated.

# Upstream JobSet's annotation, whatever its value: in-place restarts off,
# no agent needed.
disabled if _ = input.object.metadata.annotations["jobset.sigs.k8s.io/disable-in-place-restart"]

# inplace.dev/inject: "false": the webhook set nothing.
opted_out if object.get(object.get(input.object.metadata, "annotations", {}), "inplace.dev/inject", "") == "false"

# How to get a field the webhook sets when it is absent.
fix_by_removing := "set it" if opted_out

else := "remove the field to have it set for you"

# The valid value is tested first, the value to report read only when it
# is wrong.
deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	some i, rj in input.object.spec.replicatedJobs
	not rj.template.spec.backoffLimit == max_int32
	got := object.get(rj.template.spec, "backoffLimit", "unset")
	msg := sprintf("spec.replicatedJobs[%d].template.spec.backoffLimit must be 2147483647 with restartStrategy InPlaceRestart (got %v): Pods restart in place or are replaced and the Job must never fail for that; %s", [i, got, fix_by_removing])
}

deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	some i, rj in input.object.spec.replicatedJobs
	not rj.template.spec.podReplacementPolicy == "Failed"
	got := object.get(rj.template.spec, "podReplacementPolicy", "unset")
	msg := sprintf("spec.replicatedJobs[%d].template.spec.podReplacementPolicy must be Failed with restartStrategy InPlaceRestart (got %v): a replacement Pod must start only once the old one has failed; %s", [i, got, fix_by_removing])
}

deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	some i, rj in input.object.spec.replicatedJobs
	parallelism := object.get(rj.template.spec, "parallelism", 1)
	completions := object.get(rj.template.spec, "completions", parallelism)
	completions != parallelism
	msg := sprintf("spec.replicatedJobs[%d].template.spec.completions (%v) must equal parallelism (%v) with restartStrategy InPlaceRestart: every worker runs for the whole training; set both to the number of workers", [i, completions, parallelism])
}

deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	not has_agent(rj.template.spec.template.spec)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.initContainers has no agent sidecar (an init container with restartPolicy Always and a restartPolicyRules entry with action RestartAllContainers): %s", [i, agent_fix])
}

agent_fix := "remove the annotation inplace.dev/inject: \"false\" to have it injected, or add one" if opted_out

else := "add one, or install inplace's mutating webhook, which injects it"

warn contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	some j, c in rj.template.spec.template.spec.containers
	count(object.get(c, "restartPolicyRules", [])) == 0
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.containers[%d] (%s) has no restartPolicyRules: when it exits non-zero its Pod fails and is replaced instead of restarting in place", [i, j, c.name])
}

# The agents' admission policy restricts on Pods every service account an
# InPlaceRestart JobSet's Pods run as, in its namespace.
warn contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	object.get(rj.template.spec.template.spec, "serviceAccountName", "default") in {"", "default"}
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.serviceAccountName: the Pods run as the namespace's default service account, which the agents' admission policy then restricts on Pods in this namespace (every workload running as default there can no longer create, change or delete Pods) for as long as an InPlaceRestart JobSet uses it; give the JobSet a service account of its own", [i])
}

# A worker's own restart rule (the webhook keeps what the user wrote) must
# not match an exit code the Job's podFailurePolicy sends to FailJob: the
# container or Pod would restart in place on it, the Pod would never fail,
# and neither would the Job, so the JobSet's failure policy would never
# decide. The policy is read as the Job controller and the webhook read it
# (podfailure.ExitCodes): for each exit code, the first onExitCodes rule
# that selects it decides, and every code no rule names behaves like one.
# That reading is done only for a rule that may match a FailJob rule's
# codes; the same message found through two FailJob rules is one.
deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	pfp_rules := rj.template.spec.podFailurePolicy.rules
	some j, c in rj.template.spec.template.spec.containers
	some k, rule in c.restartPolicyRules
	rule.action in {"Restart", "RestartAllContainers"}
	some fail in pfp_rules
	fail.action == "FailJob"
	applies_to(fail.onExitCodes, c.name)
	may_match(rule, fail.onExitCodes)
	codes := exit_codes(c.name, pfp_rules)
	hidden := {code | some code in codes.fatal; restart_matches(rule, code)} | unnamed_codes_matched(rule, codes)
	every_other := matches_every_unnamed(rule, codes)
	hides(hidden, every_other)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.containers[%d].restartPolicyRules[%d] (%s) restarts %s in place when container %s exits with %s, which spec.replicatedJobs[%d].template.spec.podFailurePolicy sends to FailJob: the Pod never fails on them, so neither does the Job, and the JobSet's failure policy never decides; %s", [i, j, k, rule.action, restart_in_place[rule.action], c.name, hidden_text(hidden, every_other), i, worker_rule_fix(codes)])
}

# The actions that turn an exit into an in-place restart, with what they
# restart.
restart_in_place := {"RestartAllContainers": "the Pod", "Restart": "the container"}

# What the podFailurePolicy's rules say about the container's non-zero
# exit codes: fatal, the codes they name that fail the Job; non_fatal, the
# named codes that do not; others_fatal, whether every code they do not
# name fails the Job (a FailJob rule with operator NotIn, say).
exit_codes(name, rules) := {"named": named, "fatal": fatal, "non_fatal": (named - fatal) - {0}, "others_fatal": others_fatal} if {
	named := {code |
		some r in rules
		applies_to(r.onExitCodes, name)
		some code in r.onExitCodes.values
	}
	fatal := {code | some code in named; fails_job(name, rules, code)}
	unnamed := min({code | some code in numbers.range(1, count(named) + 1); not code in named})
	others_fatal := fails_job(name, rules, unnamed)
}

# Whether a restart rule matches a code a FailJob rule's onExitCodes
# selects, whatever the rules before it: the cheap test, which the rules the
# webhook injects (and most others) fail, so that they skip the evaluation
# of every code.
may_match(rule, req) if {
	req.operator == "In"
	rule.exitCodes.operator == "NotIn"
	some code in req.values
	not code in rule.exitCodes.values
	code != 0
}

may_match(rule, req) if {
	req.operator == "In"
	rule.exitCodes.operator == "In"
	some code in req.values
	code in rule.exitCodes.values
	code != 0
}

may_match(rule, req) if {
	req.operator == "In"
	not rule.exitCodes
	some code in req.values
	code != 0
}

# Both a NotIn list, or no exitCodes: infinitely many codes in common.
may_match(rule, req) if {
	req.operator == "NotIn"
	not rule.exitCodes.operator == "In"
}

may_match(rule, req) if {
	req.operator == "NotIn"
	rule.exitCodes.operator == "In"
	some code in rule.exitCodes.values
	code != 0
	not code in req.values
}

fails_job(name, rules, code) := false if code == 0

else if {
	some n, r in rules
	selects(r.onExitCodes, name, code)
	not selected_before(name, rules, code, n)
	r.action == "FailJob"
}

else := false

selected_before(name, rules, code, n) if {
	some m, r in rules
	m < n
	selects(r.onExitCodes, name, code)
}

selects(req, name, code) if {
	applies_to(req, name)
	req.operator == "In"
	code in req.values
}

selects(req, name, code) if {
	applies_to(req, name)
	req.operator == "NotIn"
	not code in req.values
}

applies_to(req, _) if not req.containerName

applies_to(req, name) if req.containerName == name

# A restart rule without exitCodes matches every exit.
restart_matches(rule, _) if not rule.exitCodes

restart_matches(rule, code) if {
	rule.exitCodes.operator == "In"
	code in rule.exitCodes.values
}

restart_matches(rule, code) if {
	rule.exitCodes.operator == "NotIn"
	not code in rule.exitCodes.values
}

# When every code the policy does not name fails the Job: the codes of a
# restart rule's In list that the policy does not name; a NotIn list or no
# exitCodes matches infinitely many of them, all of them but a few.
unnamed_codes_matched(rule, codes) := {code |
	codes.others_fatal
	rule.exitCodes.operator == "In"
	some code in rule.exitCodes.values
	code != 0
	not code in codes.named
}

matches_every_unnamed(rule, codes) if {
	codes.others_fatal
	not rule.exitCodes.operator == "In"
} else := false

hides(hidden, _) if count(hidden) > 0

hides(_, true)

hidden_text(hidden, true) := sprintf("exit codes %v or any exit code the podFailurePolicy does not name", [sort(hidden)]) if {
	count(hidden) > 0
} else := "any exit code the podFailurePolicy does not name"

hidden_text(hidden, false) := sprintf("exit codes %v", [sort(hidden)])

# The fix names the rule the webhook would inject in its place.
worker_rule_fix(codes) := sprintf("restart only on the exit codes the podFailurePolicy does not fail the Job on, as the webhook's own rule does: exitCodes {operator: In, values: %v}%s", [sort(codes.non_fatal), or_inject]) if {
	codes.others_fatal
	count(codes.non_fatal) > 0
} else := "remove the rule and keep the container's restartPolicy Never: the podFailurePolicy fails the Job on every non-zero exit code" if {
	codes.others_fatal
} else := sprintf("leave those codes out of the rule (drop them from an In list, or add them to a NotIn list as the webhook's own rule does: exitCodes {operator: NotIn, values: %v})%s", [sort({0} | codes.fatal), or_inject])

or_inject := "" if opted_out

else := ", or remove the container's restartPolicyRules to have the webhook inject that rule"

has_agent(pod) if {
	some c in pod.initContainers
	c.restartPolicy == "Always"
	some r in c.restartPolicyRules
	r.action == "RestartAllContainers"
}

# Upstream JobSet's agent in main-container mode (it runs the worker
# itself and restarts its container on a failure), known as the webhook
# knows it: its JobSet and Pod in its environment, and upstream's name or a
# variable only it reads.
has_agent(pod) if {
	some c in pod.containers
	env := {e.name | some e in object.get(c, "env", [])}
	{"JOBSET_NAME", "POD_NAME"} - env == set()
	upstream_agent(c.name, env)
	count(object.get(c, "restartPolicyRules", [])) > 0
}

upstream_agent(name, _) if name == "in-place-restart-agent"

upstream_agent(_, env) if {
	some v in {"IN_PLACE_RESTART_EXIT_CODE", "WORKER_COMMAND", "STARTUP_PROBE_PATH", "STARTUP_PROBE_PORT"}
	v in env
}

# inplace.dev/restart-scope chooses what an in-place restart restarts:
# container (the default: the kubelet restarts every container of the
# Pod) or process (a supervisor in each worker container restarts the
# worker's processes).
restart_scope := object.get(object.get(input.object.metadata, "annotations", {}), "inplace.dev/restart-scope", "container")

deny contains msg if {
	not restart_scope in {"container", "process"}
	msg := sprintf("metadata.annotations[inplace.dev/restart-scope] must be container or process, not %q: container (the default) restarts every container of a Pod through the kubelet; process restarts the workers' processes under a supervisor, without a container restart", [restart_scope])
}

warn contains msg if {
	restart_scope == "process"
	not input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	msg := "metadata.annotations[inplace.dev/restart-scope] is process, but spec.failurePolicy.restartStrategy is not InPlaceRestart: the scope of an in-place restart has no effect"
}

# In process scope the webhook runs every worker container's command under
# the supervisor; one it could not wrap would never be restarted.
deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	restart_scope == "process"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	some j, c in rj.template.spec.template.spec.containers
	not supervised(c)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.containers[%d] (%s) %s", [i, j, c.name, unsupervised_why(c)])
}

supervised(c) if {
	c.command[0] == "/inplace-supervisor/inplace-supervisor"
	c.command[1] == "supervise"
}

unsupervised_why(c) := "is not run by the supervisor, which inplace.dev/restart-scope process needs: remove the annotation inplace.dev/inject: \"false\" to have the webhook inject it, or use restart scope container" if opted_out

else := "has no command: with inplace.dev/restart-scope process its command runs under the supervisor, and admission cannot see an image's entrypoint; set command (and args) to what the image runs" if not has_command(c)

else := "is not run by the supervisor, which inplace.dev/restart-scope process needs: the webhook adds it only beside the agent it injects, and this Pod has an agent of its own; remove that agent, or use restart scope container"

has_command(c) if count(object.get(c, "command", [])) > 0
