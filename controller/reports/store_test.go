package reports

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
)

func exitAt(epoch int32, container string, code int) *protocol.WorkerExit {
	return &protocol.WorkerExit{Epoch: epoch, Container: container, Code: code}
}

// TestMerge: a report wins over the annotations where it is ahead of them,
// field by field, and loses where it is behind: whichever path a value
// came by, the higher is the latest.
func TestMerge(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		report      protocol.Report
		want        map[string]string
	}{
		"nothing on the Pod: the report is written": {
			annotations: map[string]string{},
			report:      protocol.Report{Epoch: 3, WorkerRestarts: 2, ReadyEpoch: 3, WorkerExit: exitAt(3, "w", 1)},
			want: map[string]string{
				jobset.EpochKey:                   "3",
				protocol.WorkerRestartsAnnotation: "2",
				protocol.ReadyEpochAnnotation:     "3",
				protocol.WorkerExitAnnotation:     "3:w:1",
			},
		},
		"a zero report writes nothing": {
			annotations: map[string]string{"other": "x"},
			report:      protocol.Report{JobSet: "js"},
			want:        map[string]string{"other": "x"},
		},
		"epoch ahead wins": {
			annotations: map[string]string{jobset.EpochKey: "2"},
			report:      protocol.Report{Epoch: 3},
			want:        map[string]string{jobset.EpochKey: "3"},
		},
		"epoch behind loses": {
			annotations: map[string]string{jobset.EpochKey: "5"},
			report:      protocol.Report{Epoch: 3},
			want:        map[string]string{jobset.EpochKey: "5"},
		},
		"an annotation that is no epoch is replaced": {
			annotations: map[string]string{jobset.EpochKey: "x"},
			report:      protocol.Report{Epoch: 2},
			want:        map[string]string{jobset.EpochKey: "2"},
		},
		"workerRestarts ahead wins, behind loses": {
			annotations: map[string]string{protocol.WorkerRestartsAnnotation: "4", protocol.ReadyEpochAnnotation: "2"},
			report:      protocol.Report{WorkerRestarts: 3, ReadyEpoch: 3},
			want:        map[string]string{protocol.WorkerRestartsAnnotation: "4", protocol.ReadyEpochAnnotation: "3"},
		},
		"readyEpoch behind loses, workerRestarts ahead wins": {
			annotations: map[string]string{protocol.WorkerRestartsAnnotation: "1", protocol.ReadyEpochAnnotation: "4"},
			report:      protocol.Report{WorkerRestarts: 2, ReadyEpoch: 3},
			want:        map[string]string{protocol.WorkerRestartsAnnotation: "2", protocol.ReadyEpochAnnotation: "4"},
		},
		"workerExit of a later epoch wins": {
			annotations: map[string]string{protocol.WorkerExitAnnotation: "2:a:1"},
			report:      protocol.Report{WorkerExit: exitAt(3, "b", 7)},
			want:        map[string]string{protocol.WorkerExitAnnotation: "3:b:7"},
		},
		"workerExit of an earlier epoch loses": {
			annotations: map[string]string{protocol.WorkerExitAnnotation: "4:a:1"},
			report:      protocol.Report{WorkerExit: exitAt(3, "b", 7)},
			want:        map[string]string{protocol.WorkerExitAnnotation: "4:a:1"},
		},
		"workerExit of the same epoch: the Pod's stays": {
			annotations: map[string]string{protocol.WorkerExitAnnotation: "3:a:1"},
			report:      protocol.Report{WorkerExit: exitAt(3, "b", 7)},
			want:        map[string]string{protocol.WorkerExitAnnotation: "3:a:1"},
		},
		"a workerExit annotation that is none is replaced": {
			annotations: map[string]string{protocol.WorkerExitAnnotation: "garbage"},
			report:      protocol.Report{WorkerExit: exitAt(1, "b", 7)},
			want:        map[string]string{protocol.WorkerExitAnnotation: "1:b:7"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := maps.Clone(tc.annotations)
			Merge(got, tc.report)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
		})
	}
}

func reportedPod(uid types.UID, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "p-" + string(uid), Namespace: "ns", UID: uid,
		Labels:      map[string]string{jobset.JobSetNameKey: "js"},
		Annotations: annotations,
	}}
}

// TestOverlay: a Pod with nothing held is read as it is, the very object
// of the cache; one with a report is read as a copy, and the cache's Pod
// and its annotations are never written.
func TestOverlay(t *testing.T) {
	s := NewStore()
	plain := reportedPod("a", map[string]string{jobset.EpochKey: "2"})
	if got := s.Overlay(plain); got != plain {
		t.Errorf("Overlay of a Pod with nothing held returned a copy, want the Pod itself")
	}
	// The mark says a report was merged in; the API server refuses it as
	// an annotation, so no Pod (nor its template) carries it itself.
	if errs := apivalidation.ValidateAnnotations(map[string]string{protocol.ReportedMark: "true"}, field.NewPath("metadata", "annotations")); len(errs) == 0 {
		t.Errorf("%q is a valid annotation key: a Pod could carry it and pass for reported", protocol.ReportedMark)
	}

	cases := map[string]struct {
		annotations map[string]string
		report      protocol.Report
		want        map[string]string
	}{
		"ahead": {
			annotations: map[string]string{jobset.EpochKey: "2", "keep": "me"},
			report:      protocol.Report{JobSet: "js", Epoch: 3},
			want:        map[string]string{jobset.EpochKey: "3", "keep": "me", protocol.ReportedMark: "true"},
		},
		"behind": {
			annotations: map[string]string{jobset.EpochKey: "4"},
			report:      protocol.Report{JobSet: "js", Epoch: 3},
			want:        map[string]string{jobset.EpochKey: "4", protocol.ReportedMark: "true"},
		},
		"no annotations": {
			report: protocol.Report{JobSet: "js", Epoch: 1},
			want:   map[string]string{jobset.EpochKey: "1", protocol.ReportedMark: "true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := reportedPod(types.UID(name), tc.annotations)
			before := pod.DeepCopy()
			s.Put(pod, tc.report)
			got := s.Overlay(pod)
			if got == pod {
				t.Fatalf("Overlay of a Pod with a report returned the Pod itself, want a copy")
			}
			if diff := cmp.Diff(tc.want, got.Annotations); diff != "" {
				t.Errorf("overlaid annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, pod); diff != "" {
				t.Errorf("Overlay changed the cache's Pod (-before +after):\n%s", diff)
			}
			// The copy's map is its own: writing it leaves the cache's alone.
			got.Annotations["written"] = "by the reader"
			if _, ok := pod.Annotations["written"]; ok {
				t.Errorf("the overlay shares its annotations map with the cache's Pod")
			}
			if got.Name != pod.Name || got.UID != pod.UID {
				t.Errorf("overlay is %s/%s, want %s/%s", got.Name, got.UID, pod.Name, pod.UID)
			}
		})
	}
}

type change struct {
	pod      types.UID
	old, cur protocol.Report
}

// TestPut: Put reports whether what is held changed and tells OnChange
// only then, with the report before and the new one.
func TestPut(t *testing.T) {
	s := NewStore()
	var changes []change
	s.OnChange(func(pod *corev1.Pod, old, cur protocol.Report) {
		changes = append(changes, change{pod.UID, old, cur})
	})
	pod := reportedPod("a", nil)
	first := protocol.Report{JobSet: "js", Epoch: 1, WorkerExit: exitAt(1, "w", 2)}
	second := protocol.Report{JobSet: "js", Epoch: 2, WorkerExit: exitAt(1, "w", 2)}

	steps := []struct {
		report      protocol.Report
		wantChanged bool
	}{
		{first, true},
		// Equal, though WorkerExit is another pointer.
		{protocol.Report{JobSet: "js", Epoch: 1, WorkerExit: exitAt(1, "w", 2)}, false},
		{second, true},
		{second, false},
		// Only the exit's code differs.
		{protocol.Report{JobSet: "js", Epoch: 2, WorkerExit: exitAt(1, "w", 3)}, true},
		// The exit is gone.
		{protocol.Report{JobSet: "js", Epoch: 2}, true},
	}
	for i, step := range steps {
		if got := s.Put(pod, step.report); got != step.wantChanged {
			t.Errorf("step %d: Put(%+v) = %v, want %v", i, step.report, got, step.wantChanged)
		}
		if got, ok := s.Get(pod.UID); !ok || !equalReports(got, step.report) {
			t.Errorf("step %d: Get = %+v, %v; want %+v", i, got, ok, step.report)
		}
	}
	want := []change{
		{"a", protocol.Report{}, first},
		{"a", first, second},
		{"a", second, protocol.Report{JobSet: "js", Epoch: 2, WorkerExit: exitAt(1, "w", 3)}},
		{"a", protocol.Report{JobSet: "js", Epoch: 2, WorkerExit: exitAt(1, "w", 3)}, protocol.Report{JobSet: "js", Epoch: 2}},
	}
	if diff := cmp.Diff(want, changes, cmp.AllowUnexported(change{})); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d, want 1", s.Len())
	}
}

// TestForget: a forgotten Pod's report is gone, and the Pod is read as it
// is; a nil store holds nothing.
func TestForget(t *testing.T) {
	s := NewStore()
	a, b := reportedPod("a", nil), reportedPod("b", nil)
	s.Put(a, protocol.Report{JobSet: "js", Epoch: 1})
	s.Put(b, protocol.Report{JobSet: "js", Epoch: 2})
	s.Forget(a.UID)
	if r, ok := s.Get(a.UID); ok {
		t.Errorf("Get after Forget = %+v, want nothing", r)
	}
	if got := s.Overlay(a); got != a {
		t.Errorf("Overlay after Forget returned a copy, want the Pod itself")
	}
	if r, ok := s.Get(b.UID); !ok || r.Epoch != 2 {
		t.Errorf("Forget of a dropped another Pod's report: Get(b) = %+v, %v", r, ok)
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d, want 1", s.Len())
	}

	var none *Store
	none.Forget("a")
	if _, ok := none.Get("a"); ok {
		t.Errorf("a nil store holds a report")
	}
}

// TestHeld: what is held of a Pod's agent is the report merged with what
// the Pod carries, which an agent that fell back wrote.
func TestHeld(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		report      protocol.Report
		want        protocol.Report
	}{
		"nothing": {
			want: protocol.Report{JobSet: "js"},
		},
		"the report alone": {
			report: protocol.Report{JobSet: "js", Epoch: 3, WorkerRestarts: 1, ReadyEpoch: 3, WorkerExit: exitAt(2, "w", 1)},
			want:   protocol.Report{JobSet: "js", Epoch: 3, WorkerRestarts: 1, ReadyEpoch: 3, WorkerExit: exitAt(2, "w", 1)},
		},
		"the Pod alone": {
			annotations: map[string]string{jobset.EpochKey: "4", protocol.WorkerRestartsAnnotation: "2", protocol.WorkerExitAnnotation: "4:w:9"},
			want:        protocol.Report{JobSet: "js", Epoch: 4, WorkerRestarts: 2, WorkerExit: exitAt(4, "w", 9)},
		},
		"the higher of each": {
			annotations: map[string]string{
				jobset.EpochKey: "4", protocol.WorkerRestartsAnnotation: "1",
				protocol.ReadyEpochAnnotation: "4", protocol.WorkerExitAnnotation: "2:w:9",
			},
			report: protocol.Report{JobSet: "js", Epoch: 3, WorkerRestarts: 5, ReadyEpoch: 3, WorkerExit: exitAt(3, "v", 1)},
			want:   protocol.Report{JobSet: "js", Epoch: 4, WorkerRestarts: 5, ReadyEpoch: 4, WorkerExit: exitAt(3, "v", 1)},
		},
		"a workerExit annotation that is none": {
			annotations: map[string]string{protocol.WorkerExitAnnotation: "garbage"},
			want:        protocol.Report{JobSet: "js"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := reportedPod("a", tc.annotations)
			before := pod.DeepCopy()
			if diff := cmp.Diff(tc.want, Held(pod, tc.report)); diff != "" {
				t.Errorf("Held (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, pod); diff != "" {
				t.Errorf("Held changed the Pod (-before +after):\n%s", diff)
			}
		})
	}
}
