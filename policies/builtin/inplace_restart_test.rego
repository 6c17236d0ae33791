package inplace.builtin.inplace_restart_test

import data.inplace.builtin.inplace_restart

agent := {
	"name": "agent", "restartPolicy": "Always",
	"restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}],
}

worker := {
	"name": "worker", "restartPolicy": "Never",
	"restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "NotIn", "values": [0]}}],
}

job(overrides) := job_with_pod(overrides, {"initContainers": [agent], "containers": [worker]})

job_with_pod(overrides, pod) := object.union(
	{
		"backoffLimit": 2147483647, "podReplacementPolicy": "Failed", "parallelism": 4, "completions": 4,
		"template": {"spec": pod},
	},
	overrides,
)

jobset(spec) := {"object": {"spec": {
	"failurePolicy": {"restartStrategy": "InPlaceRestart"},
	"replicatedJobs": [{"name": "workers", "template": {"spec": object.union(spec, {"template": {"spec": {"serviceAccountName": "trainer"}}})}}],
}}}

test_complete_jobset_allowed if {
	count(inplace_restart.deny) == 0 with input as jobset(job({}))
	count(inplace_restart.warn) == 0 with input as jobset(job({}))
}

test_recreate_not_checked if {
	count(inplace_restart.deny) == 0 with input as {"object": {"spec": {"replicatedJobs": [{"template": {"spec": {"backoffLimit": 0}}}]}}}
}

test_backoff_limit_denied if {
	some msg in inplace_restart.deny with input as jobset(job({"backoffLimit": 0}))
	contains(msg, "spec.replicatedJobs[0].template.spec.backoffLimit must be 2147483647")
	contains(msg, "(got 0)")
}

test_pod_replacement_policy_denied if {
	some msg in inplace_restart.deny with input as jobset(job({"podReplacementPolicy": "TerminatingOrFailed"}))
	contains(msg, "podReplacementPolicy must be Failed")
}

test_completions_differ_denied if {
	some msg in inplace_restart.deny with input as jobset(job({"completions": 8}))
	contains(msg, "completions (8) must equal parallelism (4)")
}

test_missing_agent_denied if {
	some msg in inplace_restart.deny with input as jobset(job_with_pod({}, {"containers": [worker]}))
	contains(msg, "has no agent sidecar")
}

test_agent_without_restart_rule_denied if {
	plain := object.remove(agent, ["restartPolicyRules"])
	some msg in inplace_restart.deny with input as jobset(job_with_pod({}, {"initContainers": [plain], "containers": [worker]}))
	contains(msg, "has no agent sidecar")
}

test_worker_without_rules_warned if {
	bare := {"name": "worker"}
	some msg in inplace_restart.warn with input as jobset(job_with_pod({}, {"initContainers": [agent], "containers": [bare]}))
	contains(msg, "containers[0] (worker) has no restartPolicyRules")
}

with_annotations(doc, annotations) := object.union(doc, {"object": {"metadata": {"annotations": annotations}}})

test_disabled_needs_no_agent_but_the_job_settings if {
	no_agent := job_with_pod({}, {"containers": [{"name": "worker"}]})
	disabled := with_annotations(jobset(no_agent), {"jobset.sigs.k8s.io/disable-in-place-restart": ""})
	count(inplace_restart.deny) == 0 with input as disabled
	count(inplace_restart.warn) == 0 with input as disabled
	some msg in inplace_restart.deny with input as with_annotations(jobset(job_with_pod({"backoffLimit": 0}, {"containers": [{"name": "worker"}]})), {"jobset.sigs.k8s.io/disable-in-place-restart": ""})
	contains(msg, "backoffLimit")
}

test_upstream_agent_in_main_container_mode if {
	main := {
		"name": "agent-and-worker", "restartPolicy": "Never",
		"restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}],
		"env": [{"name": "JOBSET_NAME"}, {"name": "POD_NAME"}, {"name": "WORKER_COMMAND", "value": "python train.py"}],
	}
	count(inplace_restart.deny) == 0 with input as jobset(job_with_pod({}, {"containers": [main]}))
}

test_missing_agent_names_the_fix if {
	some msg in inplace_restart.deny with input as jobset(job_with_pod({}, {"containers": [worker]}))
	contains(msg, "install inplace's mutating webhook")
	some opted in inplace_restart.deny with input as with_annotations(jobset(job_with_pod({}, {"containers": [worker]})), {"inplace.dev/inject": "false"})
	contains(opted, "remove the annotation inplace.dev/inject")
}

test_default_service_account_warned if {
	some msg in inplace_restart.warn with input as {"object": {"spec": {
		"failurePolicy": {"restartStrategy": "InPlaceRestart"},
		"replicatedJobs": [{"name": "workers", "template": {"spec": job({})}}],
	}}}
	contains(msg, "serviceAccountName: the Pods run as the namespace's default service account")
	contains(msg, "give the JobSet a service account of its own")
}

# A worker's own restart rules against the podFailurePolicy's FailJob codes.

with_pod_failure_policy(container, pfp_rules) := jobset(job_with_pod(
	{"podFailurePolicy": {"rules": pfp_rules}},
	{"initContainers": [agent], "containers": [container]},
))

worker_with(rules) := object.union(worker, {"restartPolicyRules": rules})

restart_all(exit_codes) := {"action": "RestartAllContainers", "exitCodes": exit_codes}

fail_job(operator, values) := {"action": "FailJob", "onExitCodes": {"containerName": "worker", "operator": operator, "values": values}}

test_worker_rule_in_overlapping_fail_job_codes_denied if {
	doc := with_pod_failure_policy(worker_with([restart_all({"operator": "In", "values": [1, 2, 3]})]), [fail_job("In", [3])])
	some msg in inplace_restart.deny with input as doc
	contains(msg, "spec.replicatedJobs[0].template.spec.template.spec.containers[0].restartPolicyRules[0] (RestartAllContainers) restarts the Pod in place when container worker exits with exit codes [3], which spec.replicatedJobs[0].template.spec.podFailurePolicy sends to FailJob")
	contains(msg, "exitCodes {operator: NotIn, values: [0, 3]}")
	contains(msg, "remove the container's restartPolicyRules to have the webhook inject that rule")
}

test_worker_rule_not_in_covering_fail_job_codes_denied if {
	any_container := {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [4, 3]}}
	some msg in inplace_restart.deny with input as with_pod_failure_policy(worker, [any_container])
	contains(msg, "when container worker exits with exit codes [3, 4], which")
	contains(msg, "exitCodes {operator: NotIn, values: [0, 3, 4]}")
}

test_worker_rule_without_exit_codes_denied if {
	doc := with_pod_failure_policy(worker_with([{"action": "Restart"}]), [fail_job("In", [3])])
	some msg in inplace_restart.deny with input as doc
	contains(msg, "restartPolicyRules[0] (Restart) restarts the container in place when container worker exits with exit codes [3],")
}

test_later_worker_rule_named_denied if {
	rules := [restart_all({"operator": "In", "values": [1]}), restart_all({"operator": "NotIn", "values": [0]})]
	msgs := inplace_restart.deny with input as with_pod_failure_policy(worker_with(rules), [fail_job("In", [3])])
	count(msgs) == 1
	some msg in msgs
	contains(msg, "restartPolicyRules[1]")
}

test_worker_rule_disjoint_codes_allowed if {
	disjoint := worker_with([restart_all({"operator": "In", "values": [1, 2]})])
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(disjoint, [fail_job("In", [3])])
	excluded := worker_with([restart_all({"operator": "NotIn", "values": [0, 3, 4]})])
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(excluded, [fail_job("In", [3, 4])])
}

test_fail_job_for_another_container_allowed if {
	other := {"action": "FailJob", "onExitCodes": {"containerName": "sidecar", "operator": "In", "values": [3]}}
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(worker, [other])
}

test_code_an_earlier_rule_decides_allowed if {
	ignore := {"action": "Ignore", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [3]}}
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(worker, [ignore, fail_job("In", [3])])
	some msg in inplace_restart.deny with input as with_pod_failure_policy(worker, [fail_job("In", [3]), ignore])
	contains(msg, "exit codes [3]")
}

test_fail_job_on_pod_conditions_only_allowed if {
	disruption := {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(worker, [disruption])
}

test_worker_rule_not_in_against_fail_job_not_in_denied if {
	some msg in inplace_restart.deny with input as with_pod_failure_policy(worker, [fail_job("NotIn", [143])])
	contains(msg, "restarts the Pod in place when container worker exits with any exit code the podFailurePolicy does not name, which")
	contains(msg, "restart only on the exit codes the podFailurePolicy does not fail the Job on, as the webhook's own rule does: exitCodes {operator: In, values: [143]}, or remove")

	ignore := {"action": "Ignore", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [137]}}
	pfp_rules := [ignore, fail_job("In", [3]), fail_job("NotIn", [137, 143])]
	some mixed in inplace_restart.deny with input as with_pod_failure_policy(worker, pfp_rules)
	contains(mixed, "exits with exit codes [3] or any exit code the podFailurePolicy does not name, which")
	contains(mixed, "exitCodes {operator: In, values: [137, 143]}")
}

test_worker_rule_in_within_fail_job_not_in_allowed if {
	inside := worker_with([restart_all({"operator": "In", "values": [0, 143]})])
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(inside, [fail_job("NotIn", [143])])
}

test_worker_rule_in_beyond_fail_job_not_in_denied if {
	outside := worker_with([restart_all({"operator": "In", "values": [1, 143]})])
	some msg in inplace_restart.deny with input as with_pod_failure_policy(outside, [fail_job("NotIn", [143])])
	contains(msg, "exits with exit codes [1], which")
}

test_fail_job_on_every_code_names_removing_the_rule if {
	some msg in inplace_restart.deny with input as with_pod_failure_policy(worker, [fail_job("NotIn", [0])])
	contains(msg, "remove the rule and keep the container's restartPolicy Never: the podFailurePolicy fails the Job on every non-zero exit code")
}

test_hiding_rule_opted_out_names_no_injection if {
	doc := with_annotations(with_pod_failure_policy(worker, [fail_job("In", [3])]), {"inplace.dev/inject": "false"})
	some msg in inplace_restart.deny with input as doc
	contains(msg, "exitCodes {operator: NotIn, values: [0, 3]})")
	not contains(msg, "webhook inject")
}

test_hiding_rule_without_in_place_restart_allowed if {
	recreate := json.remove(with_pod_failure_policy(worker, [fail_job("In", [3])]), ["object/spec/failurePolicy"])
	count(inplace_restart.deny) == 0 with input as recreate
	disabled := with_annotations(with_pod_failure_policy(worker, [fail_job("In", [3])]), {"jobset.sigs.k8s.io/disable-in-place-restart": ""})
	count(inplace_restart.deny) == 0 with input as disabled
}

# The rules the webhook injects (webhook/inject/testdata/*.injected.yaml).
test_injected_worker_rules_allowed if {
	# story2-without-agent: FailJob on 3 and 4.
	story2 := worker_with([restart_all({"operator": "NotIn", "values": [0, 3, 4]})])
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(story2, [fail_job("In", [3, 4])])

	# podfailurepolicy-notin: 137 ignored first, FailJob on all but 143 and 137.
	notin := worker_with([restart_all({"operator": "In", "values": [137, 143]})])
	ignore := {"action": "Ignore", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [137]}}
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(notin, [ignore, fail_job("NotIn", [143, 137])])

	# minimal: no podFailurePolicy.
	count(inplace_restart.deny) == 0 with input as jobset(job({}))
}

process(js) := object.union(js, {"object": {"metadata": {"annotations": {"inplace.dev/restart-scope": "process"}}}})

supervised_worker := object.union(worker, {"command": ["/inplace-supervisor/inplace-supervisor", "supervise", "--container=worker", "--", "python3", "train.py"]})

test_process_scope_supervised_allowed if {
	count(inplace_restart.deny) == 0 with input as process(jobset(job_with_pod({}, {"initContainers": [agent], "containers": [supervised_worker]})))
}

test_restart_scope_value_denied if {
	js := object.union(jobset(job({})), {"object": {"metadata": {"annotations": {"inplace.dev/restart-scope": "pod"}}}})
	some msg in inplace_restart.deny with input as js
	contains(msg, `restart-scope] must be container, process or in-process, not "pod"`)
}

test_agent_reports_value_denied if {
	js := object.union(jobset(job({})), {"object": {"metadata": {"annotations": {"inplace.dev/agent-reports": "pods"}}}})
	some msg in inplace_restart.deny with input as js
	contains(msg, `agent-reports] must be pod, not "pods"`)
}

test_agent_reports_pod_allowed if {
	js := object.union(jobset(job({})), {"object": {"metadata": {"annotations": {"inplace.dev/agent-reports": "pod"}}}})
	denied := inplace_restart.deny with input as js
	every msg in denied {
		not contains(msg, "agent-reports")
	}
}

test_process_scope_without_command_denied if {
	some msg in inplace_restart.deny with input as process(jobset(job({})))
	contains(msg, "containers[0] (worker) has no command")
	contains(msg, "admission cannot see an image's entrypoint")
}

test_process_scope_with_an_agent_of_its_own_denied if {
	commanded := object.union(worker, {"command": ["python3", "train.py"]})
	some msg in inplace_restart.deny with input as process(jobset(job_with_pod({}, {"initContainers": [agent], "containers": [commanded]})))
	contains(msg, "this Pod has an agent of its own")
}

in_process(js, annotations) := object.union(js, {"object": {"metadata": {"annotations": object.union({"inplace.dev/restart-scope": "in-process"}, annotations)}}})

test_in_process_scope_supervised_allowed if {
	js := jobset(job_with_pod({}, {"initContainers": [agent], "containers": [supervised_worker]}))
	count(inplace_restart.deny) == 0 with input as in_process(js, {})
	count(inplace_restart.deny) == 0 with input as in_process(js, {"inplace.dev/park-deadline": "20s"})
	count(inplace_restart.warn) == 0 with input as in_process(js, {"inplace.dev/park-deadline": "20s"})
}

test_in_process_scope_without_command_denied if {
	some msg in inplace_restart.deny with input as in_process(jobset(job({})), {})
	contains(msg, "containers[0] (worker) has no command: with inplace.dev/restart-scope in-process")
}

test_park_deadline_value_denied if {
	js := jobset(job_with_pod({}, {"initContainers": [agent], "containers": [supervised_worker]}))
	every value in {"soon", "500ms", "11m", "-5s", "10"} {
		some msg in inplace_restart.deny with input as in_process(js, {"inplace.dev/park-deadline": value})
		contains(msg, sprintf("park-deadline] must be a duration from 1s to 10m, such as 20s, not %q", [value]))
	}
}

test_park_deadline_outside_in_process_warned if {
	js := object.union(process(jobset(job_with_pod({}, {"initContainers": [agent], "containers": [supervised_worker]}))), {"object": {"metadata": {"annotations": {"inplace.dev/park-deadline": "20s"}}}})
	some msg in inplace_restart.warn with input as js
	contains(msg, "park-deadline] has no effect in restart scope process: it is for in-process workers; remove it, or set metadata.annotations[inplace.dev/restart-scope] to in-process")
}

test_standby_value_denied if {
	js := jobset(job_with_pod({}, {"initContainers": [agent], "containers": [supervised_worker]}))
	some msg in inplace_restart.deny with input as in_process(js, {"inplace.dev/standby": "yes"})
	contains(msg, `standby] must be "true" or "false", not "yes"`)
	count(inplace_restart.deny) == 0 with input as in_process(js, {"inplace.dev/standby": "true"})
}

test_process_scope_recreate_warned if {
	js := {"object": {"metadata": {"annotations": {"inplace.dev/restart-scope": "process"}}, "spec": {"replicatedJobs": []}}}
	some msg in inplace_restart.warn with input as js
	contains(msg, "has no effect")
}

# A code is decided by the first rule that selects it, among the rules that
# apply to the container: the worker's own Ignore rule comes first for it,
# and a container no rule names sees only the FailJob rule.
test_first_rule_per_container_decides if {
	ignore := {"action": "Ignore", "onExitCodes": {"containerName": "worker", "operator": "In", "values": [3]}}
	any_container := {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}
	doc := jobset(job_with_pod(
		{"podFailurePolicy": {"rules": [ignore, any_container]}},
		{"initContainers": [agent], "containers": [worker, object.union(worker, {"name": "helper"})]},
	))
	some msg in inplace_restart.deny with input as doc
	contains(msg, "containers[1].restartPolicyRules[0] (RestartAllContainers) restarts the Pod in place when container helper exits with exit codes [3], which")
	not any_denial_of_container_0(doc)
}

any_denial_of_container_0(doc) if {
	some msg in inplace_restart.deny with input as doc
	contains(msg, "containers[0].restartPolicyRules")
}

# Beyond the Job API's limits (pod_template denies it), the policy's exit
# codes are not read: the reading's cost grows with their product.
test_pod_failure_policy_beyond_the_job_api_limits_not_read if {
	rules := [fail_job("In", [k]) | some k in numbers.range(1, 21)]
	count(inplace_restart.deny) == 0 with input as with_pod_failure_policy(worker, rules)
	count(inplace_restart.deny) > 0 with input as with_pod_failure_policy(worker, array.slice(rules, 0, 20))
}

test_long_code_lists_cut if {
	doc := with_pod_failure_policy(worker, [fail_job("In", numbers.range(1, 255))])
	some msg in inplace_restart.deny with input as doc
	contains(msg, "exits with exit codes [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, ... and 235 more], which")
	contains(msg, "exitCodes {operator: NotIn, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, ... and 236 more]}")
}

# A rule without an operator selects no code, and the rules after it still
# decide theirs.
test_rule_without_operator_selects_nothing if {
	no_operator := {"action": "Ignore", "onExitCodes": {"containerName": "worker", "values": [3]}}
	some msg in inplace_restart.deny with input as with_pod_failure_policy(worker_with([{"action": "Restart"}]), [no_operator, fail_job("In", [3])])
	contains(msg, "exits with exit codes [3], which")
}
