# What an update may change in spec.replicatedJobs, as upstream JobSet's
# webhook decides: nothing, except the Pod template's labels, annotations,
# nodeSelector, tolerations and schedulingGates while the JobSet is
# suspended or being suspended (what Kueue changes when it admits a
# workload). Replicated jobs cannot be added, removed, renamed or reordered.
# The other spec fields are immutable through the CRD's own rules.
#
# Elastic replicated jobs (upstream's ElasticJobSet, always on here): the
# template's parallelism and completions of an Indexed replicated job may
# change while the JobSet has not finished, each to at least 1, and to one
# number when both are set; the controller then scales its running Jobs.
#
# Every rule begins with input.operation == "UPDATE", even where a helper
# it reads implies it: OPA indexes rules on that comparison, so a create
# skips them all unevaluated.
package inplace.builtin.update

old := input.oldObject.spec

new := input.object.spec

old_jobs := object.get(old, "replicatedJobs", [])

new_jobs := object.get(new, "replicatedJobs", [])

suspended if old.suspend == true

suspended if new.suspend == true

# mutable_when_suspended are the Pod template fields Kueue may set, by the
# object that holds them.
pod_meta_mutable := {"labels", "annotations"}

pod_spec_mutable := {"nodeSelector", "tolerations", "schedulingGates"}

fix := "delete and recreate the JobSet to change it (only the Pod template's labels, annotations, nodeSelector, tolerations and schedulingGates may change, and only while the JobSet is suspended)"

old_names := [rj.name | some rj in old_jobs]

new_names := [rj.name | some rj in new_jobs]

# Names are looked up in sets: `in` an array walks it, and once per
# replicated job that is quadratic.
old_name_set := {name | some name in old_names}

new_name_set := {name | some name in new_names}

deny contains msg if {
	input.operation == "UPDATE"
	some i, rj in new_jobs
	not rj.name in old_name_set
	msg := sprintf("spec.replicatedJobs[%d] (%s) is new: replicated jobs cannot be added to or renamed in an existing JobSet; %s", [i, rj.name, fix])
}

deny contains msg if {
	input.operation == "UPDATE"
	some name in old_names
	not name in new_name_set
	msg := sprintf("spec.replicatedJobs: %s was removed or renamed: replicated jobs cannot be removed from an existing JobSet; %s", [name, fix])
}

# old_job_named is the old replicated job of each name, the first one if a
# name repeats (the API server refuses that: replicatedJobs is a list map
# keyed by name), found from the names sorted with their indexes. Matching
# every new replicated job against every old one was quadratic; sorting is
# n log n, in Go.
old_named := sort([[rj.name, i] | some i, rj in old_jobs])

old_job_named := {name: old_jobs[i] |
	some k, [name, i] in old_named
	not old_named[k - 1][0] == name
}

deny contains msg if {
	input.operation == "UPDATE"
	old_names != new_names
	sort(old_names) == sort(new_names)
	msg := sprintf("spec.replicatedJobs: the order changed from %v to %v: the order is part of the JobSet (startup order, global Job indexes); restore it", [old_names, new_names])
}

# diffs lists the paths of the fields of a replicated job that differ
# between o and n, each with whether it may change while suspended.
diffs(o, n, prefix) := d if {
	top := {[sprintf("%s.%s", [prefix, k]), false] |
		some k in keys(o, n) - {"template"}
		differs(o, n, k)
	}
	ot := object.get(o, "template", {})
	nt := object.get(n, "template", {})
	tmpl := {[sprintf("%s.template.%s", [prefix, k]), false] |
		some k in keys(ot, nt) - {"spec"}
		differs(ot, nt, k)
	}
	oj := object.get(ot, "spec", {})
	nj := object.get(nt, "spec", {})
	job := {[sprintf("%s.template.spec.%s", [prefix, k]), false] |
		some k in (keys(oj, nj) - {"template"}) - elastic_fields(oj, nj)
		differs(oj, nj, k)
	}
	op := object.get(oj, "template", {})
	np := object.get(nj, "template", {})
	pod := {[sprintf("%s.template.spec.template.%s", [prefix, k]), false] |
		some k in keys(op, np) - {"metadata", "spec"}
		differs(op, np, k)
	}
	om := object.get(op, "metadata", {})
	nm := object.get(np, "metadata", {})
	pod_meta := {[sprintf("%s.template.spec.template.metadata.%s", [prefix, k]), k in pod_meta_mutable] |
		some k in keys(om, nm)
		differs(om, nm, k)
	}
	os := object.get(op, "spec", {})
	ns := object.get(np, "spec", {})
	pod_spec := {[sprintf("%s.template.spec.template.spec.%s", [prefix, k]), k in pod_spec_mutable] |
		some k in keys(os, ns)
		differs(os, ns, k)
	}
	d := ((((top | tmpl) | job) | pod) | pod_meta) | pod_spec
}

keys(a, b) := {k | some k, _ in a} | {k | some k, _ in b}

# differs treats a missing field, null and an empty value alike, as the
# API's Go types do.
differs(a, b, k) if value(a, k) != value(b, k)

value(obj, k) := v if {
	v := object.get(obj, k, null)
	not v in {{}, [], ""}
} else := null

deny contains msg if {
	input.operation == "UPDATE"
	some i, rj in new_jobs
	orj := old_job_named[rj.name]

	# An unchanged replicated job, the common case, is one comparison (in
	# Go) rather than a walk of its fields.
	orj != rj
	some [path, kueue] in diffs(orj, rj, sprintf("spec.replicatedJobs[%d]", [i]))
	not kueue
	msg := sprintf("%s is immutable: %s", [path, fix])
}

deny contains msg if {
	input.operation == "UPDATE"
	not suspended
	some i, rj in new_jobs
	orj := old_job_named[rj.name]
	orj != rj
	some [path, kueue] in diffs(orj, rj, sprintf("spec.replicatedJobs[%d]", [i]))
	kueue
	msg := sprintf("%s can change only while the JobSet is suspended: set spec.suspend to true in this or an earlier update, as Kueue does", [path])
}

# elastic_fields are the Job template fields an update may change: those
# of elastic_keys when the Jobs are Indexed (then the Job controller scales
# a running Job by its index), none otherwise.
elastic_keys := {"parallelism", "completions"}

elastic_fields(oj, nj) := elastic_keys if {
	indexed(oj)
	indexed(nj)
} else := set()

indexed(job) if object.get(job, "completionMode", "") == "Indexed"

# scaled lists the replicated jobs an update scales: [index in the new
# spec, old Job template, new Job template], with a changed elastic field.
scaled contains [i, oj, nj] if {
	input.operation == "UPDATE"
	some i, rj in new_jobs
	orj := old_job_named[rj.name]
	oj := object.get(object.get(orj, "template", {}), "spec", {})
	nj := object.get(object.get(rj, "template", {}), "spec", {})
	some k in elastic_fields(oj, nj)
	differs(oj, nj, k)
}

old_status := object.get(input.oldObject, "status", {})

finished if {
	some c in object.get(old_status, "conditions", [])
	c.type in {"Completed", "Failed"}
	c.status == "True"
}

finished if object.get(old_status, "terminalState", "") in {"Completed", "Failed"}

deny contains msg if {
	input.operation == "UPDATE"
	finished
	some [i, oj, nj] in scaled
	some k in elastic_keys
	differs(oj, nj, k)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.%s: cannot change parallelism or completions of a finished JobSet (its Completed or Failed condition is True): nothing runs any more to scale; leave them as they were", [i, k])
}

deny contains msg if {
	input.operation == "UPDATE"
	some [i, oj, nj] in scaled
	some k in elastic_keys
	differs(oj, nj, k)
	got := object.get(nj, k, null)
	not at_least_one(got)
	msg := sprintf("spec.replicatedJobs[%d].template.spec.%s must be at least 1 to scale a replicated job (got %v): set it to the new number of Pods per Job; suspend the JobSet to stop its Pods instead", [i, k, got])
}

at_least_one(n) if {
	is_number(n)
	n >= 1
}

deny contains msg if {
	input.operation == "UPDATE"
	some [i, oj, nj] in scaled
	p := object.get(nj, "parallelism", null)
	c := object.get(nj, "completions", null)
	p != null
	c != null
	p != c
	msg := sprintf("spec.replicatedJobs[%d].template.spec.completions (%v) must equal parallelism (%v) to scale a replicated job: set both to the new number of Pods per Job", [i, c, p])
}

# The restart scope is built into the Pod templates at creation (the
# supervisor wraps the workers' commands in process scope), and they cannot
# change.
scope_of(obj) := object.get(object.get(obj.metadata, "annotations", {}), "inplace.dev/restart-scope", "container")

deny contains msg if {
	input.operation == "UPDATE"
	scope_of(input.oldObject) != scope_of(input.object)
	msg := sprintf("metadata.annotations[inplace.dev/restart-scope] cannot change from %s to %s: the Pod templates were built for %s scope at creation; delete and recreate the JobSet to change it", [scope_of(input.oldObject), scope_of(input.object), scope_of(input.oldObject)])
}

# So are, in in-process scope, the deadline to park and the standby: the
# supervisor's flags.
built_in_annotations := {"inplace.dev/park-deadline", "inplace.dev/standby"}

annotation_of(obj, key) := object.get(object.get(obj.metadata, "annotations", {}), key, "(unset)")

deny contains msg if {
	input.operation == "UPDATE"
	scope_of(input.oldObject) == "in-process"
	some key in built_in_annotations
	annotation_of(input.oldObject, key) != annotation_of(input.object, key)
	msg := sprintf("metadata.annotations[%s] cannot change from %s to %s: the supervisor's flags were built from it into the Pod templates at creation; delete and recreate the JobSet to change it", [key, annotation_of(input.oldObject, key), annotation_of(input.object, key)])
}
