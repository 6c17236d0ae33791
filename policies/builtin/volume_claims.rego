# spec.volumeClaimPolicies as upstream JobSet's webhook validates them: a
# claim template's name is unique across the policies, is a DNS-1123
# subdomain, leaves room for the claim's name <template>-<jobset> in 63
# characters, is mounted by name by some container or init container, and
# is not also the name of a volume of a Pod template.
package inplace.builtin.volume_claims

dns1123_subdomain := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

spec := input.object.spec

meta := object.get(input.object, "metadata", {})

replicated_jobs := object.get(spec, "replicatedJobs", [])

# jobset_name: see names.rego; a generateName is cut to 58 characters and
# gets 5 random ones.
jobset_name := meta.name if {
	object.get(meta, "name", "") != ""
} else := concat("", [substring(meta.generateName, 0, 58), "abcde"]) if {
	object.get(meta, "generateName", "") != ""
} else := ""

# templates are the claim templates, each [path, name]; one set, built once
# and read by every rule.
templates := {[path, name] |
	some [name, i, j] in named_templates
	path := template_path(i, j)
}

# named_templates are the claim templates as [name, i, j], sorted: the
# templates of one name are next to each other, the first of them first.
# Comparing every pair of the CRD's 2,500 templates took a minute; sorting
# is n log n, in Go.
named_templates := sort([[name, i, j] |
	some i, policy in input.object.spec.volumeClaimPolicies
	some j, t in policy.templates
	name := object.get(t, ["metadata", "name"], "")
])

# first_template_named is the path of the first template of each name.
first_template_named := {name: template_path(i, j) |
	some k, [name, i, j] in named_templates
	not named_templates[k - 1][0] == name
}

template_path(i, j) := sprintf("spec.volumeClaimPolicies[%d].templates[%d]", [i, j])

deny contains msg if {
	some k, [name, i, j] in named_templates
	named_templates[k - 1][0] == name
	msg := sprintf("%s.metadata.name %q is also the name of %s: claim template names must be unique across spec.volumeClaimPolicies", [template_path(i, j), name, first_template_named[name]])
}

deny contains msg if {
	some [path, name] in templates
	not valid_subdomain(name)
	msg := sprintf("%s.metadata.name %q must be a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit): it names the claim and the volume that mounts it", [path, name])
}

deny contains msg if {
	some [path, name] in templates
	valid_subdomain(name)
	claim := sprintf("%s-%s", [name, jobset_name])
	count(claim) > 63
	msg := sprintf("%s.metadata.name %q: the claim name %q (<template>-<jobset>) is %d characters, more than 63: shorten the template name or the JobSet's name by %d", [path, name, claim, count(claim), count(claim) - 63])
}

deny contains msg if {
	some [path, name] in templates
	name != ""
	not name in mounted
	msg := sprintf("%s.metadata.name %q is mounted by no container: add a volumeMount named %q to a container or init container of a replicated job, or remove the template", [path, name, name])
}

# A volume is looked up among the templates by name, and reported against
# the first template of its name (the others are reported as duplicates):
# the volumes and the templates are each walked once, not their product.
deny contains msg if {
	some i, rj in replicated_jobs
	some k, v in object.get(rj.template.spec.template.spec, "volumes", [])
	v.name != ""
	path := first_template_named[v.name]
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.volumes[%d].name %q is also the name of the claim template %s: the claim provides that volume; remove the volume or rename one of them", [i, k, v.name, path])
}

# mounted are the names every container and init container mounts, built
# once for every template to look up.
mounted := {m.name |
	some rj in replicated_jobs
	some kind in ["initContainers", "containers"]
	some c in object.get(rj.template.spec.template.spec, kind, [])
	some m in object.get(c, "volumeMounts", [])
}

valid_subdomain(s) if {
	count(s) <= 253
	regex.match(dns1123_subdomain, s)
}
