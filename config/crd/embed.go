package crd

import _ "embed"

// JobSet is the YAML of the JobSet CustomResourceDefinition,
// bases/jobset.x-k8s.io_jobsets.yaml.
//
//go:embed bases/jobset.x-k8s.io_jobsets.yaml
var JobSet []byte
