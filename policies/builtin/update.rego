# What an update may change in spec.replicatedJobs, as upstream JobSet's
# webhook decides: nothing, except the Pod template's labels, annotations,
# nodeSelector, tolerations and schedulingGates while the JobSet is
# suspended or being suspended (what Kueue changes when it admits a
# workload). Replicated jobs cannot be added, removed, renamed or reordered.
# The other spec fields are immutable through the CRD's own rules.
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

deny contains msg if {
	input.operation == "UPDATE"
	some i, rj in new_jobs
	not rj.name in old_names
	msg := sprintf("spec.replicatedJobs[%d] (%s) is new: replicated jobs cannot be added to or renamed in an existing JobSet; %s", [i, rj.name, fix])
}

deny contains msg if {
	input.operation == "UPDATE"
	some name in old_names
	not name in new_names
	msg := sprintf("spec.replicatedJobs: %s was removed or renamed: replicated jobs cannot be removed from an existing JobSet; %s", [name, fix])
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
		some k in keys(oj, nj) - {"template"}
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
	some j, orj in old_jobs
	orj.name == rj.name
	some [path, kueue] in diffs(orj, rj, sprintf("spec.replicatedJobs[%d]", [i]))
	not kueue
	msg := sprintf("%s is immutable: %s", [path, fix])
}

deny contains msg if {
	input.operation == "UPDATE"
	not suspended
	some i, rj in new_jobs
	some j, orj in old_jobs
	orj.name == rj.name
	some [path, kueue] in diffs(orj, rj, sprintf("spec.replicatedJobs[%d]", [i]))
	kueue
	msg := sprintf("%s can change only while the JobSet is suspended: set spec.suspend to true in this or an earlier update, as Kueue does", [path])
}
