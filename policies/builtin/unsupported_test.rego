package inplace.builtin.unsupported_test

import data.inplace.builtin.unsupported

test_volume_claim_policies_not_warned if {
	js := {"object": {"metadata": {}, "spec": {"volumeClaimPolicies": [{"templates": [{"metadata": {"name": "data"}}]}]}}}
	count(unsupported.warn) == 0 with input as js
}

test_exclusive_topology_warned if {
	js := {"metadata": {"annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "pool"}}, "spec": {}}
	some msg in unsupported.warn with input as {"object": js}
	contains(msg, "exclusive placement is not supported")
}

test_plain_jobset_clean if {
	count(unsupported.warn) == 0 with input as {"object": {"metadata": {}, "spec": {}}}
}
