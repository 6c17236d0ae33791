# What restartStrategy InPlaceRestart needs (the in-place restart KEP's
# webhook rules): Jobs that never fail because of a Pod, replacement Pods
# only once the old one has failed, every worker running at once, and an
# agent sidecar in every Pod.
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
