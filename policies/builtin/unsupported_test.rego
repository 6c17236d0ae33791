package inplace.builtin.unsupported_test

import data.inplace.builtin.unsupported

test_volume_claim_policies_denied if {
	some msg in unsupported.deny with input as {"object": {"metadata": {}, "spec": {"volumeClaimPolicies": [{"templates": []}]}}}
	contains(msg, "spec.volumeClaimPolicies is not supported")
}

test_exclusive_topology_warned if {
	js := {"metadata": {"annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "pool"}}, "spec": {}}
	some msg in unsupported.warn with input as {"object": js}
	contains(msg, "exclusive placement is not supported")
}

test_plain_jobset_clean if {
	count(unsupported.deny) == 0 with input as {"object": {"metadata": {}, "spec": {}}}
	count(unsupported.warn) == 0 with input as {"object": {"metadata": {}, "spec": {}}}
}
