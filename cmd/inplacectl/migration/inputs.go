package migration

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// Inputs is what the check reads of a cluster.
type Inputs struct {
	Now time.Time
	// UpstreamNamespace is where upstream JobSet was looked for,
	// Namespace where inplace was.
	UpstreamNamespace, Namespace string

	CRD coexist.CRD
	// Leases are upstream's Leases that exist.
	Leases []coexist.Lease
	// Upstream are upstream's controller Deployments that exist.
	Upstream []Deployment
	// Webhooks are upstream's webhook configurations that exist, as
	// "kind/name".
	Webhooks []string
	// Manager are inplace's Deployments, found or not.
	Manager []Deployment
	// JobSets are every JobSet of the cluster, with their Jobs.
	JobSets []JobSet
}

// Deployment is what matters of a Deployment.
type Deployment struct {
	Namespace, Name string
	Found           bool
	// Replicas is spec.replicas; Running, its Pods not yet gone
	// (status.replicas); Available, those available.
	Replicas, Running, Available int32
	// Ours: labelled as inplace's (NameLabel), as the install under
	// upstream's names (config/jobset-names) is, under upstream's
	// Deployment name.
	Ours bool
}

// JobSet is one JobSet as stored, with its Jobs.
type JobSet struct {
	JobSet *jobset.JobSet
	// Undeclared are the fields stored that inplace's CRD does not
	// declare, as paths ("spec.scheduling"): the API server drops them
	// once the CRD is inplace's.
	Undeclared []string
	// Jobs are the Jobs it controls.
	Jobs []batchv1.Job
}
