# Names and label values derived from the JobSet must be valid where they
# end up, as upstream JobSet's webhook requires: a JobSet admitted with a
# name its Jobs, Pods, Service or coordinator label cannot carry could never
# run. Job names <jobset>-<replicatedJob>-<index> are DNS-1035 labels and
# the Pod hostnames <job>-<podIndex> DNS labels; so are group names and the subdomain (the headless
# Service's name); the coordinator endpoint is a label value; managedBy is a
# domain-prefixed path.
package inplace.builtin.names

dns1035_label := `^[a-z]([-a-z0-9]*[a-z0-9])?$`

label_value := `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

dns1123_subdomain := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

http_path := `^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$`

# generated_suffix stands for the 5 random characters the API server
# appends to a generateName, which it first cuts to 58 characters.
generated_suffix := "abcde"

meta := object.get(input.object, "metadata", {})

spec := input.object.spec

# jobset_name is the name the JobSet has or, for a generateName, one of the
# longest it can get.
jobset_name := name if {
	name := input.object.metadata.name
	name != ""
} else := concat("", [substring(meta.generateName, 0, 58), generated_suffix]) if {
	object.get(meta, "generateName", "") != ""
} else := ""

# name_field is the field to change: for a generated name (which the
# validating webhook sees already generated), the generateName.
name_field := "metadata.generateName" if object.get(meta, "generateName", "") != ""

else := "metadata.name"

display_name := object.get(meta, "generateName", "") if object.get(meta, "generateName", "") != ""

else := object.get(meta, "name", "")

deny contains msg if {
	jobset_name != ""
	not regex.match(dns1035_label, substring(jobset_name, 0, 1))
	msg := sprintf("%s %q starts with %q, but the names of its Jobs, which begin with it, must be DNS-1035 labels and start with a letter: choose a name that starts with a lower-case letter", [name_field, display_name, substring(jobset_name, 0, 1)])
}

deny contains msg if {
	contains(jobset_name, ".")
	msg := sprintf("%s %q contains '.', but the names of its Jobs, which begin with it, must be DNS-1035 labels: use '-' instead of '.'", [name_field, display_name])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	not regex.match(`^[-a-z0-9]+$`, rj.name)
	msg := sprintf("spec.replicatedJobs[%d].name %q is part of the names of its Jobs and Pods, which must be DNS-1035 labels: use only lower-case letters, digits and '-'", [i, rj.name])
}

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	job := longest_job_name(rj)
	count(job) > 63
	msg := sprintf("spec.replicatedJobs[%d].name: the Job name %q (<%s>-<replicatedJob>-<index>) is %d characters, more than the 63 of a DNS label: shorten %s or spec.replicatedJobs[%d].name by %d", [i, job, name_field, count(job), name_field, i, count(job) - 63])
}

# Pod hostnames: the Job controller gives a Pod of an Indexed Job the
# hostname <job>-<podIndex>, a DNS label. (Its name, <job>-<podIndex>- with
# 5 random characters, never overflows: the API server cuts a generateName
# to 58 characters. Upstream budgets those 6 characters too and refuses
# names 58 to 63 characters long; see docs/reference/compatibility.md.)
deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	job := longest_job_name(rj)
	count(job) <= 63
	object.get(rj.template.spec, "completionMode", "Indexed") == "Indexed"
	completions := object.get(rj.template.spec, "completions", object.get(rj.template.spec, "parallelism", 1))
	pod := sprintf("%s-%d", [job, max([completions - 1, 0])])
	count(pod) > 63
	msg := sprintf("spec.replicatedJobs[%d].name: the Pod hostname %q is %d characters, more than the 63 of a DNS label: shorten %s or spec.replicatedJobs[%d].name by %d", [i, pod, count(pod), name_field, i, count(pod) - 63])
}

longest_job_name(rj) := sprintf("%s-%s-%d", [jobset_name, rj.name, max([object.get(rj, "replicas", 1) - 1, 0])])

deny contains msg if {
	some i, rj in input.object.spec.replicatedJobs
	group := object.get(rj, "groupName", "default")
	not valid_dns1035_label(group)
	msg := sprintf("spec.replicatedJobs[%d].groupName %q must be a DNS-1035 label (at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it becomes a label value and part of names; choose such a name", [i, group])
}

deny contains msg if {
	sub := input.object.spec.network.subdomain
	sub != ""
	not valid_dns1035_label(sub)
	msg := sprintf("spec.network.subdomain %q must be a DNS-1035 label (at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it names the headless Service; choose such a name", [sub])
}

deny contains msg if {
	manager := input.object.spec.managedBy
	manager != null
	not valid_domain_prefixed_path(manager)
	msg := sprintf("spec.managedBy %q must be a domain-prefixed path such as example.com/my-controller: a DNS subdomain, '/', then a non-empty path", [manager])
}

deny contains msg if {
	c := input.object.spec.coordinator
	endpoint := coordinator_endpoint(c)
	not valid_label_value(endpoint)
	msg := sprintf("spec.coordinator: the coordinator endpoint %q (%d characters) becomes the value of the label jobset.sigs.k8s.io/coordinator, which must be at most 63 characters of letters, digits, '-', '_' and '.': shorten %s, spec.coordinator.replicatedJob or spec.network.subdomain", [endpoint, count(endpoint), name_field])
}

coordinator_endpoint(c) := sprintf("%s-%s-%d-%d.%s", [jobset_name, c.replicatedJob, object.get(c, "jobIndex", 0), object.get(c, "podIndex", 0), subdomain])

subdomain := s if {
	s := object.get(spec, ["network", "subdomain"], "")
	s != ""
} else := jobset_name

valid_dns1035_label(s) if {
	count(s) <= 63
	regex.match(dns1035_label, s)
}

valid_label_value(s) if {
	count(s) <= 63
	regex.match(label_value, s)
}

valid_domain_prefixed_path(s) if {
	parts := split(s, "/")
	count(parts) > 1
	host := parts[0]
	path := substring(s, count(host) + 1, -1)
	count(host) <= 253
	regex.match(dns1123_subdomain, host)
	regex.match(http_path, path)
}
