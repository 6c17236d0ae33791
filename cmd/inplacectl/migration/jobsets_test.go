package migration

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/config/crd"
)

func schemaOf(t *testing.T, data []byte) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Spec.Versions[0].Schema.OpenAPIV3Schema
}

func TestUndeclared(t *testing.T) {
	ours := schemaOf(t, crd.JobSet)
	stored := func(doc string) map[string]any {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for name, tc := range map[string]struct {
		obj  string
		want []string
	}{
		"a JobSet as upstream stores it: nothing dropped": {
			obj: `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: ns, uid: u, labels: {a: b}}
spec:
  replicatedJobs:
  - name: w
    replicas: 2
    template:
      metadata: {labels: {x: y}}
      spec:
        template:
          metadata: {annotations: {k: v}}
          spec: {containers: [{name: c, image: busybox}]}
status:
  restarts: 1
  conditions: [{type: RestartingJobSet, status: "False", reason: JobsReady, message: m, lastTransitionTime: "2026-03-01T12:00:00Z"}]
  replicatedJobsStatus: [{name: w, ready: 2, succeeded: 0, failed: 0, active: 2, suspended: 0, jobRestarts: [0, 1]}]
  previousInPlaceRestartAttempt: 0
`,
		},
		"fields of a later upstream release": {
			obj: `
spec:
  scheduling: {gangPolicy: JobSetAsGang}
  replicatedJobs:
  - name: w
    exclusive: {topologyKey: rack}
    template: {spec: {template: {spec: {containers: [{name: c}]}}}}
status:
  activeDeadline: 3
`,
			want: []string{"spec.replicatedJobs[].exclusive", "spec.scheduling", "status.activeDeadline"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, undeclared(stored(tc.obj), ours)); diff != "" {
				t.Errorf("undeclared (-want +got):\n%s", diff)
			}
		})
	}
}

// Every field upstream's CRD declares, ours declares too: a JobSet stored
// under upstream's loses nothing when ours replaces it. (A later upstream
// release may add fields; the check names them per JobSet.)
func TestOurCRDDeclaresUpstreamsFields(t *testing.T) {
	data, err := os.ReadFile("../../../test/testdata/upstream-jobset/crd/jobset.x-k8s.io_jobsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	upstream, ours := schemaOf(t, data), schemaOf(t, crd.JobSet)
	var missing []string
	var walk func(path string, u, o *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, u, o *apiextensionsv1.JSONSchemaProps) {
		for name, us := range u.Properties {
			op, ok := o.Properties[name]
			if !ok {
				missing = append(missing, path+name)
				continue
			}
			walk(path+name+".", &us, &op)
		}
		if u.Items != nil && u.Items.Schema != nil && o.Items != nil && o.Items.Schema != nil {
			walk(path+"[].", u.Items.Schema, o.Items.Schema)
		}
	}
	walk("", upstream, ours)
	if len(missing) > 0 {
		t.Errorf("fields of upstream's CRD that ours lacks, dropped by the migration: %v", missing)
	}
}

func TestJobSetNotes(t *testing.T) {
	js := func(mutate ...func(*jobset.JobSet)) *jobset.JobSet {
		j := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "ns", UID: "u"},
			Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{Name: "w", Replicas: 2}}}}
		j.Status.Restarts = 1
		for _, m := range mutate {
			m(j)
		}
		return j
	}
	job := func(index, attempt string, labels ...string) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "js-w-" + index, Labels: map[string]string{
			jobset.ReplicatedJobNameKey: "w", jobset.JobIndexKey: index, jobset.RestartsKey: attempt}}}
		for i := 0; i+1 < len(labels); i += 2 {
			j.Labels[labels[i]] = labels[i+1]
		}
		return j
	}
	for name, tc := range map[string]struct {
		in   JobSet
		want []string // each a part of one note, in order
	}{
		"running, its Jobs of the current attempt, upstream's labels: nothing changes": {
			in: JobSet{JobSet: js(), Jobs: []batchv1.Job{job("0", "1"), job("1", "1", jobset.JobRestartAttemptKey, "0")}},
		},
		"a Job of an earlier attempt remains: a restart is under way": {
			in:   JobSet{JobSet: js(), Jobs: []batchv1.Job{job("0", "0"), job("0", "1"), job("1", "1")}},
			want: []string{"Jobs of an earlier attempt remain: js-w-0"},
		},
		"condition RestartingJobSet": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetRestarting), Status: metav1.ConditionTrue}}
			})},
			want: []string{"condition RestartingJobSet"},
		},
		"an in-place restart deprecated and not synced": {
			// Upstream writes the attempts of InPlaceRestart JobSets only;
			// the restarts they stand for are counted too.
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 5}
				j.Status.PreviousInPlaceRestartAttempt, j.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](2), ptr.To[int32](2)
			})},
			want: []string{"in-place restart attempt 2 deprecated", "upstream restarted it in place 2 time(s)"},
		},
		"a Job restarted alone that status does not count: recreated": {
			in:   JobSet{JobSet: js(), Jobs: []batchv1.Job{job("0", "1", jobset.JobRestartAttemptKey, "1"), job("1", "1"), job("5", "1")}},
			want: []string{"js-w-0 (label jobset.sigs.k8s.io/job-restart-attempt=\"1\", status.replicatedJobsStatus says 0), js-w-5 (label jobset.sigs.k8s.io/job-index=\"5\""},
		},
		"restarted in place by upstream: counted": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 5}
				j.Status.PreviousInPlaceRestartAttempt, j.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](2), ptr.To[int32](3)
			})},
			want: []string{"upstream restarted it in place 2 time(s) (currentInPlaceRestartAttempt 3, less 1 recreation(s)): inplace counts them once it takes the JobSet over, " +
				"as in-place restarts towards maxRestarts (5), as upstream did: status.restarts 1 -> 3, inPlaceRestarts 2, restartsCountTowardsMax 0 -> 2; " +
				"its epochs go on from upstream's attempts (syncedEpoch 4, deprecatedEpoch 3)"},
		},
		"never restarted in place by upstream: nothing to count": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Spec.FailurePolicy = &jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 5}
				j.Status.CurrentInPlaceRestartAttempt = ptr.To[int32](1)
			})},
		},
		"exclusive placement: placed as upstream placed it, nothing to say": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Annotations = map[string]string{jobset.ExclusiveKey: "rack", jobset.NodeSelectorStrategyKey: "true"}
			})},
		},
		"finished: only the fields dropped matter": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Annotations = map[string]string{jobset.ExclusiveKey: "rack"}
				j.Status.TerminalState = jobset.TerminalStateCompleted
			}), Undeclared: []string{"spec.scheduling"}, Jobs: []batchv1.Job{job("0", "0")}},
			want: []string{"drops once the CRD is replaced: spec.scheduling"},
		},
		"managed by another controller: left alone": {
			in: JobSet{JobSet: js(func(j *jobset.JobSet) {
				j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
			}), Jobs: []batchv1.Job{job("0", "0")}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := jobSetNotes(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("notes %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("note %q does not say %q", got[i], w)
				}
			}
		})
	}
}
