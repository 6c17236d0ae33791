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
