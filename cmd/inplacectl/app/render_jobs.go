package app

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// jobTemplateWarnings names what the API server admits in a JobSet but
// refuses in the Jobs the controller creates from it, so that render does
// not call accepted a JobSet that can never run.
//
// A container without an image: the JobSet CRD's schema, like the Job's
// OpenAPI, leaves image optional, and upstream JobSet's validating webhook
// does not look at the Pod template, so the API server stores the JobSet;
// the Job's own validation then refuses every Job ("Required value"). The
// verdict stays the API server's (accepted); this is a warning beside it.
//
// It reads the JobSet as it would be stored (JSON), after injection.
func jobTemplateWarnings(stored []byte) ([]string, error) {
	var js jobset.JobSet
	if err := json.Unmarshal(stored, &js); err != nil {
		return nil, fmt.Errorf("reading the stored JobSet: %w", err)
	}
	var warnings []string
	missing := func(rj int, list string, containers []corev1.Container) {
		for j, c := range containers {
			if c.Image == "" {
				warnings = append(warnings, fmt.Sprintf(
					"render: spec.replicatedJobs[%d].template.spec.template.spec.%s[%d].image: Required value: the API server stores the JobSet (as upstream JobSet's, its webhook does not check images) but refuses every Job created from it (spec.template.spec.%s[%d].image: Required value); give container %q an image",
					rj, list, j, list, j, c.Name))
			}
		}
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		pod := rj.Template.Spec.Template.Spec
		missing(i, "initContainers", pod.InitContainers)
		missing(i, "containers", pod.Containers)
	}
	return warnings, nil
}
