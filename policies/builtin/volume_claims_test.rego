package inplace.builtin.volume_claims_test

import data.inplace.builtin.volume_claims

pod(mounts, volumes) := {"containers": [{"name": "c", "volumeMounts": mounts}], "volumes": volumes}

jobset(templates, pod_spec) := {"object": {"metadata": {"name": "train"}, "spec": {
	"volumeClaimPolicies": [{"templates": templates}],
	"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": pod_spec}}}}],
}}}

claim(name) := {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteMany"]}}

test_mounted_claim_allowed if {
	count(volume_claims.deny) == 0 with input as jobset([claim("data")], pod([{"name": "data", "mountPath": "/data"}], []))
}

test_unmounted_claim_denied if {
	some msg in volume_claims.deny with input as jobset([claim("data")], pod([], []))
	contains(msg, "spec.volumeClaimPolicies[0].templates[0].metadata.name \"data\" is mounted by no container")
}

test_duplicate_claim_denied if {
	some msg in volume_claims.deny with input as jobset([claim("data"), claim("data")], pod([{"name": "data", "mountPath": "/data"}], []))
	contains(msg, "spec.volumeClaimPolicies[0].templates[1].metadata.name \"data\" is also the name of spec.volumeClaimPolicies[0].templates[0]")
}

test_conflicting_volume_denied if {
	some msg in volume_claims.deny with input as jobset([claim("data")], pod([{"name": "data", "mountPath": "/data"}], [{"name": "data", "emptyDir": {}}]))
	contains(msg, "spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name \"data\" is also the name of the claim template")
}

test_invalid_name_denied if {
	some msg in volume_claims.deny with input as jobset([claim("Data")], pod([{"name": "Data", "mountPath": "/data"}], []))
	contains(msg, "must be a DNS-1123 subdomain")
}

test_long_claim_name_denied if {
	long := "a-claim-template-name-that-is-far-too-long-for-a-claim-name"
	some msg in volume_claims.deny with input as jobset([claim(long)], pod([{"name": long, "mountPath": "/data"}], []))
	contains(msg, "more than 63")
}

test_each_duplicate_claim_denied_against_the_first_by_index if {
	templates := [claim(sprintf("c%d", [k])) | some k in numbers.range(0, 9)]
	doc := jobset(array.concat(templates, [claim("c2")]), pod([{"name": sprintf("c%d", [k]), "mountPath": sprintf("/c%d", [k])} | some k in numbers.range(0, 9)], []))
	denials := volume_claims.deny with input as doc
	denials == {"spec.volumeClaimPolicies[0].templates[10].metadata.name \"c2\" is also the name of spec.volumeClaimPolicies[0].templates[2]: claim template names must be unique across spec.volumeClaimPolicies"}
}
