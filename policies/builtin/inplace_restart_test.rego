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
