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
	some i, policy in input.object.spec.volumeClaimPolicies
	some j, t in policy.templates
	path := sprintf("spec.volumeClaimPolicies[%d].templates[%d]", [i, j])
	name := object.get(t, ["metadata", "name"], "")
}

deny contains msg if {
	some [path, name] in templates
	some [other, name2] in templates
	name == name2
	other < path
	msg := sprintf("%s.metadata.name %q is also the name of %s: claim template names must be unique across spec.volumeClaimPolicies", [path, name, other])
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
	not mounted(name)
	msg := sprintf("%s.metadata.name %q is mounted by no container: add a volumeMount named %q to a container or init container of a replicated job, or remove the template", [path, name, name])
}

deny contains msg if {
	some [path, name] in templates
	name != ""
	some i, rj in replicated_jobs
	some k, v in object.get(rj.template.spec.template.spec, "volumes", [])
	v.name == name
	msg := sprintf("spec.replicatedJobs[%d].template.spec.template.spec.volumes[%d].name %q is also the name of the claim template %s: the claim provides that volume; remove the volume or rename one of them", [i, k, name, path])
}

mounted(name) if {
	some rj in replicated_jobs
	some kind in ["initContainers", "containers"]
	some c in object.get(rj.template.spec.template.spec, kind, [])
	some m in object.get(c, "volumeMounts", [])
	m.name == name
}

valid_subdomain(s) if {
	count(s) <= 253
	regex.match(dns1123_subdomain, s)
}
