package guardrails.accelerators_test

import data.guardrails.accelerators

jobset(strategy, limits) := {"object": {"metadata": {}, "spec": {
	"failurePolicy": {"restartStrategy": strategy},
	"replicatedJobs": [{"template": {"spec": {"template": {"spec": {"containers": [{"name": "w", "resources": {"limits": limits}}]}}}}}],
}}}

test_gpu_recreate_warned if {
	some msg in accelerators.warn with input as jobset("Recreate", {"nvidia.com/gpu": 8})
	contains(msg, "set restartStrategy: InPlaceRestart")
}

test_gpu_in_place_not_warned if {
	count(accelerators.warn) == 0 with input as jobset("InPlaceRestart", {"nvidia.com/gpu": 8})
}

test_cpu_only_untouched if {
	count(accelerators.warn) == 0 with input as jobset("Recreate", {"cpu": 4})
	count(accelerators.patch) == 0 with input as jobset("Recreate", {"cpu": 4})
}

test_gpu_labelled if {
	some op in accelerators.patch with input as jobset("InPlaceRestart", {"nvidia.com/gpu": 8})
	op.path == "/metadata/labels/inplace.dev~1accelerators"
}
