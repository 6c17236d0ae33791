package inplace.builtin.update_test

import data.inplace.builtin.update

pod_spec := {"containers": [{"name": "c", "image": "img:1"}], "nodeSelector": {"pool": "a"}}

rj(name) := {"name": name, "replicas": 2, "template": {"spec": {"parallelism": 2, "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}}}}

js(suspend, rjs) := {"spec": {"suspend": suspend, "replicatedJobs": rjs}}

request(old, new) := {"operation": "UPDATE", "oldObject": old, "object": new}


test_unchanged_allowed if {
	count(update.deny) == 0 with input as request(js(false, [rj("a")]), js(false, [rj("a")]))
}

test_create_not_checked if {
	count(update.deny) == 0 with input as {"operation": "CREATE", "object": js(false, [rj("a")])}
}

test_kueue_fields_while_suspended_allowed if {
	changed := json.patch(rj("a"), [
		{"op": "replace", "path": "/template/spec/template/spec/nodeSelector", "value": {"pool": "b"}},
		{"op": "add", "path": "/template/spec/template/spec/tolerations", "value": [{"key": "gpu", "operator": "Exists"}]},
		{"op": "add", "path": "/template/spec/template/spec/schedulingGates", "value": [{"name": "kueue"}]},
		{"op": "replace", "path": "/template/spec/template/metadata/labels", "value": {"app": "x", "queue": "q"}},
		{"op": "add", "path": "/template/spec/template/metadata/annotations", "value": {"k": "v"}},
	])
	count(update.deny) == 0 with input as request(js(true, [rj("a")]), js(true, [changed]))
	count(update.deny) == 0 with input as request(js(false, [rj("a")]), js(true, [changed]))
	count(update.deny) == 0 with input as request(js(true, [rj("a")]), js(false, [changed]))
}

test_kueue_field_while_running_denied if {
	changed := json.patch(rj("a"), [{"op": "replace", "path": "/template/spec/template/spec/nodeSelector", "value": {"pool": "b"}}])
	some msg in update.deny with input as request(js(false, [rj("a")]), js(false, [changed]))
	msg == "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector can change only while the JobSet is suspended: set spec.suspend to true in this or an earlier update, as Kueue does"
}

test_container_change_denied_even_suspended if {
	changed := json.patch(rj("a"), [{"op": "replace", "path": "/template/spec/template/spec/containers/0/image", "value": "img:2"}])
	some msg in update.deny with input as request(js(true, [rj("a")]), js(true, [changed]))
	startswith(msg, "spec.replicatedJobs[0].template.spec.template.spec.containers is immutable: delete and recreate the JobSet")
}

test_replicas_change_denied if {
	changed := json.patch(rj("a"), [{"op": "replace", "path": "/replicas", "value": 3}])
	some msg in update.deny with input as request(js(true, [rj("a")]), js(true, [changed]))
	startswith(msg, "spec.replicatedJobs[0].replicas is immutable")
}

test_job_spec_change_denied if {
	changed := json.patch(rj("a"), [{"op": "replace", "path": "/template/spec/parallelism", "value": 3}])
	some msg in update.deny with input as request(js(false, [rj("a")]), js(false, [changed]))
	startswith(msg, "spec.replicatedJobs[0].template.spec.parallelism is immutable")
}

test_added_denied if {
	some msg in update.deny with input as request(js(true, [rj("a")]), js(true, [rj("a"), rj("b")]))
	startswith(msg, "spec.replicatedJobs[1] (b) is new: replicated jobs cannot be added")
}

test_removed_denied if {
	some msg in update.deny with input as request(js(true, [rj("a"), rj("b")]), js(true, [rj("a")]))
	startswith(msg, "spec.replicatedJobs: b was removed or renamed")
}

test_reordered_denied if {
	some msg in update.deny with input as request(js(true, [rj("a"), rj("b")]), js(true, [rj("b"), rj("a")]))
	startswith(msg, "spec.replicatedJobs: the order changed")
}

test_empty_and_missing_alike if {
	empty := json.patch(rj("a"), [{"op": "add", "path": "/template/spec/template/spec/tolerations", "value": []}])
	count(update.deny) == 0 with input as request(js(false, [rj("a")]), js(false, [empty]))
}

indexed_rj(name) := json.patch(rj(name), [
	{"op": "add", "path": "/template/spec/completionMode", "value": "Indexed"},
	{"op": "add", "path": "/template/spec/completions", "value": 2},
])

scaled_rj(name, parallelism, completions) := json.patch(indexed_rj(name), [
	{"op": "replace", "path": "/template/spec/parallelism", "value": parallelism},
	{"op": "replace", "path": "/template/spec/completions", "value": completions},
])

finished_js(type, rjs) := object.union(js(false, rjs), {"status": {"conditions": [{"type": type, "status": "True"}]}})

test_scale_indexed_allowed if {
	count(update.deny) == 0 with input as request(js(false, [indexed_rj("a")]), js(false, [scaled_rj("a", 4, 4)]))
	count(update.deny) == 0 with input as request(js(false, [indexed_rj("a")]), js(false, [scaled_rj("a", 1, 1)]))
	count(update.deny) == 0 with input as request(js(true, [indexed_rj("a")]), js(true, [scaled_rj("a", 3, 3)]))
}

test_scale_parallelism_alone_without_completions_allowed if {
	old := json.patch(indexed_rj("a"), [{"op": "remove", "path": "/template/spec/completions"}])
	new := json.patch(old, [{"op": "replace", "path": "/template/spec/parallelism", "value": 5}])
	count(update.deny) == 0 with input as request(js(false, [old]), js(false, [new]))
}

test_scale_below_one_denied if {
	some msg in update.deny with input as request(js(false, [indexed_rj("a")]), js(false, [scaled_rj("a", 0, 0)]))
	startswith(msg, "spec.replicatedJobs[0].template.spec.parallelism must be at least 1 to scale a replicated job (got 0)")
	some msg2 in update.deny with input as request(js(false, [indexed_rj("a")]), js(false, [scaled_rj("a", 0, 0)]))
	startswith(msg2, "spec.replicatedJobs[0].template.spec.completions must be at least 1")
}

test_scale_completions_other_than_parallelism_denied if {
	some msg in update.deny with input as request(js(false, [indexed_rj("a")]), js(false, [scaled_rj("a", 4, 2)]))
	msg == "spec.replicatedJobs[0].template.spec.completions (2) must equal parallelism (4) to scale a replicated job: set both to the new number of Pods per Job"
}

test_scale_finished_denied if {
	some type in ["Completed", "Failed"]
	some msg in update.deny with input as request(finished_js(type, [indexed_rj("a")]), js(false, [scaled_rj("a", 4, 4)]))
	startswith(msg, "spec.replicatedJobs[0].template.spec.parallelism: cannot change parallelism or completions of a finished JobSet")
}

test_scale_finished_unchanged_allowed if {
	count(update.deny) == 0 with input as request(finished_js("Completed", [indexed_rj("a")]), js(false, [indexed_rj("a")]))
}

test_scale_non_indexed_denied if {
	old := json.patch(indexed_rj("a"), [{"op": "replace", "path": "/template/spec/completionMode", "value": "NonIndexed"}])
	new := json.patch(old, [{"op": "replace", "path": "/template/spec/parallelism", "value": 4}, {"op": "replace", "path": "/template/spec/completions", "value": 4}])
	some msg in update.deny with input as request(js(false, [old]), js(false, [new]))
	startswith(msg, "spec.replicatedJobs[0].template.spec.parallelism is immutable")
}

test_scale_keeps_other_fields_immutable if {
	new := json.patch(scaled_rj("a", 4, 4), [{"op": "add", "path": "/template/spec/backoffLimit", "value": 3}])
	denials := update.deny with input as request(js(false, [indexed_rj("a")]), js(false, [new]))
	count(denials) == 1
	some msg in denials
	startswith(msg, "spec.replicatedJobs[0].template.spec.backoffLimit is immutable")
}

test_scale_with_replicas_denied if {
	new := json.patch(scaled_rj("a", 4, 4), [{"op": "replace", "path": "/replicas", "value": 3}])
	denials := update.deny with input as request(js(false, [indexed_rj("a")]), js(false, [new]))
	count(denials) == 1
	some msg in denials
	startswith(msg, "spec.replicatedJobs[0].replicas is immutable")
}

test_restart_scope_change_denied if {
	old := object.union(js(false, [rj("a")]), {"metadata": {}})
	new := object.union(js(false, [rj("a")]), {"metadata": {"annotations": {"inplace.dev/restart-scope": "process"}}})
	some msg in update.deny with input as request(old, new)
	contains(msg, "cannot change from container to process")
	count(update.deny) == 0 with input as request(new, new)
}

test_park_deadline_and_standby_change_denied if {
	old := object.union(js(false, [rj("a")]), {"metadata": {"annotations": {"inplace.dev/restart-scope": "in-process"}}})
	new := object.union(old, {"metadata": {"annotations": {"inplace.dev/park-deadline": "20s", "inplace.dev/standby": "true"}}})
	denials := update.deny with input as request(old, new)
	some msg in denials
	contains(msg, "metadata.annotations[inplace.dev/park-deadline] cannot change from (unset) to 20s")
	some other in denials
	contains(other, "metadata.annotations[inplace.dev/standby] cannot change from (unset) to true")
	count(update.deny) == 0 with input as request(new, new)

	# Outside in-process scope nothing was built from them.
	process := object.union(js(false, [rj("a")]), {"metadata": {"annotations": {"inplace.dev/restart-scope": "process", "inplace.dev/standby": "true"}}})
	unannotated := json.remove(process, ["metadata/annotations/inplace.dev~1standby"])
	count(update.deny) == 0 with input as request(process, unannotated)
}
