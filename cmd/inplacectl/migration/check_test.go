package migration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/inplace-dev/inplace/controller/coexist"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// migrated is a cluster where every step is done.
func migrated() Inputs {
	return Inputs{
		Now: now, UpstreamNamespace: "jobset-system", Namespace: "inplace-system",
		CRD: coexist.CRD{Installed: true, Ours: true, Served: true},
		Manager: []Deployment{
			{Namespace: "inplace-system", Name: "inplace-manager", Found: true, Replicas: 2, Running: 2, Available: 2},
			{Namespace: "inplace-system", Name: "inplace-webhook", Found: true, Replicas: 2, Running: 2, Available: 2},
		},
	}
}

// upstreamRunning is a cluster where upstream JobSet runs as installed.
func upstreamRunning() Inputs {
	in := migrated()
	in.CRD = coexist.CRD{Installed: true, Served: true, Pruned: []string{"status.inPlaceRestarts", "status.syncedEpoch"}}
	in.Upstream = []Deployment{{Namespace: "jobset-system", Name: "jobset-controller-manager", Found: true, Replicas: 1, Running: 1, Available: 1}}
	in.Leases = []coexist.Lease{{Namespace: "jobset-system", Name: "6d4f6a47.jobset.x-k8s.io", Holder: "jobset-controller-manager-7d9f-x2x4q_1b2c",
		Renewed: now.Add(-2 * time.Second), Expires: now.Add(13 * time.Second), Held: true}}
	in.Webhooks = []string{"mutatingwebhookconfiguration/jobset-mutating-webhook-configuration", "validatingwebhookconfiguration/jobset-validating-webhook-configuration"}
	in.Manager = []Deployment{{Namespace: "inplace-system", Name: "inplace-manager"}, {Namespace: "inplace-system", Name: "inplace-webhook"}}
	return in
}

// line is a finding as the tests compare it: its severity, step, and the
// part of its message that says what to do.
type line struct {
	Severity Severity
	Step     string
	Mentions string
}

func TestCheck(t *testing.T) {
	stopped := upstreamRunning()
	stopped.Upstream[0].Replicas, stopped.Upstream[0].Running, stopped.Upstream[0].Available = 0, 0, 0
	stopped.Leases[0].Held = false
	stopped.Leases[0].Renewed, stopped.Leases[0].Expires = now.Add(-time.Minute), now.Add(-45*time.Second)
	terminating := upstreamRunning()
	terminating.Upstream[0].Replicas = 0
	notReady := migrated()
	notReady.Manager[0].Available = 0
	unlabelled := migrated()
	unlabelled.CRD.Ours = false

	for name, tc := range map[string]struct {
		in   Inputs
		want []line
	}{
		"upstream JobSet installed and running: every step blocks": {
			in: upstreamRunning(),
			want: []line{
				{Blocking, StepUpstreamController, "kubectl -n jobset-system scale deployment jobset-controller-manager --replicas=0"},
				{Blocking, StepUpstreamController, "Lease jobset-system/6d4f6a47.jobset.x-k8s.io is held by jobset-controller-manager-7d9f-x2x4q_1b2c, renewed 2s ago"},
				{Blocking, StepUpstreamWebhooks, "kubectl delete mutatingwebhookconfiguration/jobset-mutating-webhook-configuration validatingwebhookconfiguration/jobset-validating-webhook-configuration"},
				{Blocking, StepCRD, "its schema lacks status.inPlaceRestarts, status.syncedEpoch"},
				{Blocking, StepInplace, "no Deployment inplace-system/inplace-manager"},
				{Blocking, StepInplace, "no Deployment inplace-system/inplace-webhook"},
				{Done, StepJobSets, "0 JobSet(s)"},
			},
		},
		"scaled to 0 with a Pod still terminating, Lease held: still blocks": {
			in: terminating,
			want: []line{
				{Blocking, StepUpstreamController, "has 0 replica(s), 1 running"},
				{Blocking, StepUpstreamController, "is held by"},
			},
		},
		"upstream stopped, its Lease lapsed: step 1 done, the rest to do": {
			in: stopped,
			want: []line{
				{Done, StepUpstreamController, "no replica of jobset-controller-manager or jobset-controller"},
				{Blocking, StepUpstreamWebhooks, "delete them"},
				{Blocking, StepCRD, "--force-conflicts"},
			},
		},
		"inplace installed but not ready": {
			in: notReady,
			want: []line{
				{Blocking, StepInplace, "inplace-system/inplace-manager has no available replica"},
				{Done, StepInplace, "inplace-system/inplace-webhook: 2 of 2 replica(s) available"},
			},
		},
		"a CRD that keeps every field without our label: a warning": {
			in:   unlabelled,
			want: []line{{Warning, StepCRD, "lacks the label inplace.dev/crd-owner=inplace"}},
		},
		"migrated: nothing blocks": {
			in: migrated(),
			want: []line{
				{Done, StepUpstreamController, ""},
				{Done, StepUpstreamWebhooks, ""},
				{Done, StepCRD, ""},
				{Done, StepInplace, "inplace-manager"},
				{Done, StepInplace, "inplace-webhook"},
				{Done, StepJobSets, ""},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Check(tc.in)
			for _, w := range tc.want {
				found := false
				for _, f := range got {
					if f.Severity == w.Severity && f.Step == w.Step && strings.Contains(f.Message, w.Mentions) {
						found = true
					}
				}
				if !found {
					t.Errorf("no finding %+v in:\n%s", w, render(t, got))
				}
			}
			if name == "migrated: nothing blocks" {
				if len(got) != len(tc.want) || Blocked(got) != 0 {
					t.Errorf("migrated: want only the %d steps done, got:\n%s", len(tc.want), render(t, got))
				}
			}
		})
	}
}

func TestWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		in   Inputs
		want string
	}{
		"blocked":  {in: upstreamRunning(), want: "6 finding(s) block the migration"},
		"migrated": {in: migrated(), want: "Nothing blocks"},
	} {
		t.Run(name, func(t *testing.T) {
			out := render(t, Check(tc.in))
			if !strings.Contains(out, tc.want) || !strings.Contains(out, StepCRD) {
				t.Errorf("Write printed:\n%s\nwant it to say %q and name the steps", out, tc.want)
			}
		})
	}
}

func render(t *testing.T, fs []Finding) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, fs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
