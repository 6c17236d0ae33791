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
# That reading is made only for a rule that may match a FailJob rule's
# codes (may_hide), once per replicated job and container name
# (exit_codes), and only within the Job API's limits, which bound its cost
# (pod_template reports a policy beyond them); each restart rule then costs
# the size of its own list (hidden_failure).
deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	not disabled
	some i, rj in input.object.spec.replicatedJobs
	rj.template.spec.podFailurePolicy.rules
	within_job_api_limits(i)
	some j, c in rj.template.spec.template.spec.containers
	some k, rule in c.restartPolicyRules
	rule.action in {"Restart", "RestartAllContainers"}
	may_hide(i, scope(i, c.name), rule)
	hidden := hidden_failure(i, scope(i, c.name), rule)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.containers[%d].restartPolicyRules[%d] (%s) restarts %s in place when container %s exits with %s, which spec.replicatedJobs[%d].template.spec.podFailurePolicy sends to FailJob: the Pod never fails on them, so neither does the Job, and the JobSet's failure policy never decides; %s", [i, j, k, rule.action, restart_in_place[rule.action], c.name, hidden, i, worker_rule_fix(i, scope(i, c.name))])
}

# The functions below take the replicated job's index and a container's
# scope rather than its podFailurePolicy or the codes read from it: OPA
# caches a function's results by its arguments, and compares an argument
# whole on every call.
pfp_rules(i) := input.object.spec.replicatedJobs[i].template.spec.podFailurePolicy.rules

# The Job API's limits: at most 20 rules, of at most 255 exit codes each.
within_job_api_limits(i) if {
	rules := pfp_rules(i)
	count(rules) <= 20
	every r in rules {
		not count(r.onExitCodes.values) > 255
	}
}

# may_hide says whether a restart rule matches a code a FailJob rule of
# scope names or selects, whatever the rules before it: the cheap test, which
# the rules the webhook injects (and most others) fail, so that they skip
# reading the policy's exit codes. Each body costs the size of the rule's
# list, in Go's set operations, never that of the policy's.
may_hide(i, scope, rule) if {
	# A NotIn list or none, against a NotIn rule: infinitely many codes in
	# common.
	not rule.exitCodes.operator == "In"
	count(fail_codes(i, scope).not_in) > 0
}

may_hide(i, scope, rule) if {
	not rule.exitCodes.operator == "In"
	fail := fail_codes(i, scope)
	count(fail.in) > count(fail.in & listed_codes(rule))
}

may_hide(i, scope, rule) if {
	rule.exitCodes.operator == "In"
	count(listed_codes(rule) & fail_codes(i, scope).in) > 0
}

may_hide(i, scope, rule) if {
	rule.exitCodes.operator == "In"
	some codes in fail_codes(i, scope).not_in
	count((listed_codes(rule) - {0}) - codes) > 0
}

# fail_codes are the non-zero codes the FailJob rules of scope list: in, the
# codes of their In lists; not_in, the list of each NotIn rule.
fail_codes(i, scope) := {"in": in_codes - {0}, "not_in": not_in} if {
	fails := [r.onExitCodes | some r in pfp_rules(i); r.action == "FailJob"; applies_to(r.onExitCodes, scope)]
	in_codes := {code | some req in fails; req.operator == "In"; some code in req.values}
	not_in := [{code | some code in req.values} | some req in fails; req.operator == "NotIn"]
}

listed_codes(rule) := {code | some code in rule.exitCodes.values}

# scope is the container name the podFailurePolicy's rules see: name, if a
# rule names it; else a value no rule names, the same for every such
# container, so that their exit codes are read once.
scope(i, name) := name if {
	some r in pfp_rules(i)
	r.onExitCodes.containerName == name
} else := {"a container no rule names": true}

# The actions that turn an exit into an in-place restart, with what they
# restart.
restart_in_place := {"RestartAllContainers": "the Pod", "Restart": "the container"}

# What the podFailurePolicy's rules say about the non-zero exit codes of
# the containers of scope: fatal, the codes they name that fail the Job;
# non_fatal, the named codes that do not; others_fatal, whether every code
# they do not name fails the Job (a FailJob rule with operator NotIn, say).
#
# A code is decided by the first rule that selects it. Rule k decides the
# codes it selects that no earlier rule does: those on no earlier In list
# (in_before) and, once a NotIn rule came before, on every earlier NotIn
# list (not_in_before; a code off one was selected by it). Each is a set
# operation OPA makes in Go, on lists of at most 255 codes but for the
# first NotIn rule's, which selects every named code off its list.
exit_codes(i, scope) := {"named": named, "fatal": fatal, "fatal_sorted": sort(fatal), "non_fatal": (named - fatal) - {0}, "others_fatal": others_fatal} if {
	applying := [r.onExitCodes | some r in pfp_rules(i); applies_to(r.onExitCodes, scope)]
	actions := [r.action | some r in pfp_rules(i); applies_to(r.onExitCodes, scope)]
	lists := [{code | some code in req.values} | some req in applying]
	named := union({list | some list in lists})
	in_before := [union({lists[m] | some m, earlier in applying; m < k; earlier.operator == "In"}) | some k, _ in applying]
	not_in_before := [[lists[m] | some m, earlier in applying; m < k; earlier.operator == "NotIn"] | some k, _ in applying]
	decided := [decided_by(object.get(req, "operator", ""), lists[k], named, in_before[k], not_in_before[k]) | some k, req in applying]
	fatal := union({decided[k] | some k, action in actions; action == "FailJob"}) - {0}

	# A code no rule names is on no In list and on no NotIn list: the
	# first NotIn rule decides it.
	not_in_actions := [actions[k] | some k, req in applying; req.operator == "NotIn"]
	others_fatal := count([true | not_in_actions[0] == "FailJob"]) > 0
}

# A rule of another operator selects no code.
decided_by(operator, _, _, _, _) := set() if not operator in {"In", "NotIn"}

decided_by("In", list, _, in_before, []) := list - in_before

decided_by("In", list, _, in_before, not_in_before) := intersection({list} | {l | some l in not_in_before}) - in_before if {
	count(not_in_before) > 0
}

decided_by("NotIn", list, named, in_before, []) := (named - list) - in_before

decided_by("NotIn", list, _, in_before, not_in_before) := (intersection({l | some l in not_in_before}) - list) - in_before if {
	count(not_in_before) > 0
}

applies_to(req, _) if not req.containerName

applies_to(req, name) if req.containerName == name

# hidden_failure says which exit codes a restart rule restarts on that the
# podFailurePolicy fails the Job on, for the containers of scope, and is
# undefined if there are none. It costs the size of the rule's own list,
# never that of every fatal code: of those, it counts the ones a NotIn list
# leaves out and lists the first max_codes_listed.
hidden_failure(i, scope, rule) := text if {
	codes := exit_codes(i, scope)
	[n, first, every_other] := hidden_codes(restart_list(rule), codes, listed_codes(rule))
	text := hidden_text(n, first, every_other)
}

restart_list(rule) := "all" if {
	not rule.exitCodes
} else := rule.exitCodes.operator if {
	rule.exitCodes.operator in {"In", "NotIn"}
} else := "none"

# hidden_codes returns how many hidden codes there are, the first of them
# sorted, and whether every code the policy does not name is hidden too
# (when every such code fails the Job, a NotIn list or no list matches
# all of them but a few; an In list matches those of its codes the policy
# does not name).
hidden_codes("all", codes, _) := [count(codes.fatal), array.slice(codes.fatal_sorted, 0, max_codes_listed), codes.others_fatal]

hidden_codes("In", codes, listed) := [count(hidden), array.slice(sort(hidden), 0, max_codes_listed), false] if {
	unnamed := {code | codes.others_fatal; some code in listed; code != 0; not code in codes.named}
	hidden := (listed & codes.fatal) | unnamed
}

# The first hidden codes are among the first fatal ones, as many more as the
# list leaves out.
hidden_codes("NotIn", codes, listed) := [n, first, codes.others_fatal] if {
	n := count(codes.fatal) - count(listed & codes.fatal)
	candidates := array.slice(codes.fatal_sorted, 0, max_codes_listed + count(listed))
	first := array.slice([code | some code in candidates; not code in listed], 0, max_codes_listed)
}

hidden_codes("none", codes, _) := [0, [], codes.others_fatal]

hidden_text(n, first, true) := sprintf("exit codes %s or any exit code the podFailurePolicy does not name", [codes_text(n, first)]) if {
	n > 0
} else := "any exit code the podFailurePolicy does not name"

hidden_text(n, first, false) := sprintf("exit codes %s", [codes_text(n, first)]) if n > 0

# codes_text lists n exit codes by the first of them, sorted, at most
# max_codes_listed: a message is cut at 1,024 bytes anyway, and formatting
# thousands of codes into the message of each rule of each container was
# most of the check's cost.
max_codes_listed := 20

codes_text(n, first) := sprintf("%v", [first]) if {
	n <= max_codes_listed
} else := sprintf("[%s, ... and %d more]", [concat(", ", [sprintf("%d", [code]) | some code in first]), n - max_codes_listed])

sorted_text(codes) := codes_text(count(codes), array.slice(sort(codes), 0, max_codes_listed))

# The fix names the rule the webhook would inject in its place.
worker_rule_fix(i, scope) := sprintf("restart only on the exit codes the podFailurePolicy does not fail the Job on, as the webhook's own rule does: exitCodes {operator: In, values: %s}%s", [sorted_text(codes.non_fatal), or_inject]) if {
	codes := exit_codes(i, scope)
	codes.others_fatal
	count(codes.non_fatal) > 0
} else := "remove the rule and keep the container's restartPolicy Never: the podFailurePolicy fails the Job on every non-zero exit code" if {
	exit_codes(i, scope).others_fatal
} else := sprintf("leave those codes out of the rule (drop them from an In list, or add them to a NotIn list as the webhook's own rule does: exitCodes {operator: NotIn, values: %s})%s", [sorted_text({0} | exit_codes(i, scope).fatal), or_inject])

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
# Pod), process (a supervisor in each worker container restarts the
# worker's processes) or in-process (the supervisor asks the worker to
# park and resume in its process, and restarts it only if it does not).
restart_scope := object.get(annotations, "inplace.dev/restart-scope", "container")

annotations := object.get(input.object.metadata, "annotations", {})

supervised_scopes := {"process", "in-process"}

deny contains msg if {
	not restart_scope in {"container", "process", "in-process"}
	msg := sprintf("metadata.annotations[inplace.dev/restart-scope] must be container, process or in-process, not %q: container (the default) restarts every container of a Pod through the kubelet; process restarts the workers' processes under a supervisor, without a container restart; in-process keeps the workers' processes, which leave the epoch and resume when told (docs/reference/worker-protocol.md)", [restart_scope])
}

warn contains msg if {
	restart_scope in supervised_scopes
	not input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	msg := sprintf("metadata.annotations[inplace.dev/restart-scope] is %s, but spec.failurePolicy.restartStrategy is not InPlaceRestart: the scope of an in-place restart has no effect", [restart_scope])
}

# inplace.dev/park-deadline is how long, in in-process scope, a worker has
# to park once its epoch is over before it is restarted as a process.
deny contains msg if {
	value := annotations["inplace.dev/park-deadline"]
	not valid_park_deadline(value)
	msg := sprintf("metadata.annotations[inplace.dev/park-deadline] must be a duration from 1s to 10m, such as 20s, not %q: it is how long a worker has to park in in-process scope before it is restarted as a process; leave it out for 10s", [value])
}

valid_park_deadline(value) if {
	# Checked first: the builtin fails the evaluation on text it cannot read.
	regex.match(`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`, value)
	ns := time.parse_duration_ns(value)
	ns >= 1000000000
	ns <= 600000000000
}

warn contains msg if {
	# At creation: the scope cannot change after it.
	not input.operation == "UPDATE"
	some key in {"inplace.dev/park-deadline", "inplace.dev/standby"}
	key in object.keys(annotations)
	restart_scope != "in-process"
	msg := sprintf("metadata.annotations[%s] has no effect in restart scope %s: it is for in-process workers; remove it, or set metadata.annotations[inplace.dev/restart-scope] to in-process", [key, restart_scope])
}

# inplace.dev/standby: "true" keeps a standby process of each worker, in
# in-process scope.
deny contains msg if {
	value := annotations["inplace.dev/standby"]
	not value in {"true", "false"}
	msg := sprintf("metadata.annotations[inplace.dev/standby] must be \"true\" or \"false\", not %q: \"true\" keeps a standby process of each worker, started ahead, to take the place of one that fails", [value])
}

# inplace.dev/agent-reports: pod has the JobSet's agents report on their
# Pods instead of to the controller; no other value means anything, and a
# misspelt one would leave the agents reporting directly unnoticed.
deny contains msg if {
	value := input.object.metadata.annotations["inplace.dev/agent-reports"]
	value != "pod"
	msg := sprintf("metadata.annotations[inplace.dev/agent-reports] must be pod, not %q: pod has the agents report on their Pods instead of to the controller; leave the annotation out for direct reports", [value])
}

# In process scope the webhook runs every worker container's command under
# the supervisor; one it could not wrap would never be restarted.
deny contains msg if {
	input.object.spec.failurePolicy.restartStrategy == "InPlaceRestart"
	restart_scope in supervised_scopes
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

unsupervised_why(c) := sprintf("is not run by the supervisor, which inplace.dev/restart-scope %s needs: remove the annotation inplace.dev/inject: \"false\" to have the webhook inject it, or use restart scope container", [restart_scope]) if opted_out

else := sprintf("has no command: with inplace.dev/restart-scope %s its command runs under the supervisor, and admission cannot see an image's entrypoint; set command (and args) to what the image runs", [restart_scope]) if not has_command(c)

else := sprintf("is not run by the supervisor, which inplace.dev/restart-scope %s needs: the webhook adds it only beside the agent it injects, and this Pod has an agent of its own; remove that agent, or use restart scope container", [restart_scope])

has_command(c) if count(object.get(c, "command", [])) > 0
