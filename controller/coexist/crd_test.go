package coexist

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/config/crd"
)

// upstreamCRDFile is upstream JobSet's CRD, kept as test data.
const upstreamCRDFile = "../../test/testdata/upstream-jobset/crd/jobset.x-k8s.io_jobsets.yaml"

func decodeCRD(t *testing.T, data []byte) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func upstreamCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(upstreamCRDFile)
	if err != nil {
		t.Fatal(err)
	}
	return decodeCRD(t, data)
}

func TestInspectCRD(t *testing.T) {
	ours := decodeCRD(t, crd.JobSet)
	unlabelled := ours.DeepCopy()
	unlabelled.Labels = nil
	notServed := ours.DeepCopy()
	notServed.Spec.Versions[0].Served = false
	preserving := upstreamCRD(t)
	status := preserving.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	status.XPreserveUnknownFields = ptr.To(true)
	preserving.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	withoutJobRestarts := ours.DeepCopy()
	rjs := withoutJobRestarts.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["replicatedJobsStatus"]
	delete(rjs.Items.Schema.Properties, "jobRestarts")

	for name, tc := range map[string]struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		want CRD
	}{
		"none installed": {},
		"ours": {
			crd:  ours,
			want: CRD{Installed: true, Ours: true, Served: true},
		},
		"upstream's: our four status fields pruned": {
			crd:  upstreamCRD(t),
			want: CRD{Installed: true, Served: true, Pruned: []string{"status.inPlaceRestarts", "status.deprecatedEpoch", "status.syncedEpoch", "status.syncedPods"}},
		},
		"ours without the label (an earlier release's): not ours, nothing pruned": {
			crd:  unlabelled,
			want: CRD{Installed: true, Served: true},
		},
		"v1alpha2 not served": {
			crd:  notServed,
			want: CRD{Installed: true, Ours: true},
		},
		"a status that preserves unknown fields prunes nothing": {
			crd:  preserving,
			want: CRD{Installed: true, Served: true},
		},
		"a nested field missing": {
			crd:  withoutJobRestarts,
			want: CRD{Installed: true, Ours: true, Served: true, Pruned: []string{"status.replicatedJobsStatus[].jobRestarts"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := InspectCRD(tc.crd)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InspectCRD (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusFieldsAreInOurCRD keeps StatusFields and our CRD in step: every
// path it lists is one the CRD declares, so that an upstream CRD is judged
// on real fields.
func TestStatusFieldsAreInOurCRD(t *testing.T) {
	fields := StatusFields()
	for _, want := range []string{"status.conditions", "status.restarts", "status.syncedEpoch", "status.replicatedJobsStatus", "status.replicatedJobsStatus[].jobRestarts"} {
		if !slices.Contains(fields, want) {
			t.Errorf("StatusFields() lacks %s: %v", want, fields)
		}
	}
	root := decodeCRD(t, crd.JobSet).Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, f := range fields {
		if !keeps(root, strings.Split(f, ".")) {
			t.Errorf("our CRD does not declare %s", f)
		}
	}
}
