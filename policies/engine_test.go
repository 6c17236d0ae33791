package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// admitted loads a spec manifest and mutates it as the webhook does.
func admitted(t testing.TB, file string, edit func(*jobset.JobSet)) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "test", "testdata", "specs", file))
	if err != nil {
		t.Fatal(err)
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&js)
	}
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	jobset.Default(&js)
	inject.Inject(&js, cfg.Agent)
	raw, err := json.Marshal(&js)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBuiltinsOnSpecManifests(t *testing.T) {
	e, err := NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file      string
		edit      func(*jobset.JobSet)
		wantDeny  []string
		wantWarns []string
	}{
		"in-place Story 1 is admitted, with a warning for its default service account": {
			file: "inplace-story1.yaml",
			wantWarns: []string{
				"inplace_restart: spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName: the Pods run as the namespace's default service account",
			},
		},
		"in-place Story 2 is admitted": {
			file:      "inplace-story2.yaml",
			wantWarns: []string{"inplace_restart:"},
		},
		"KEP-262 Story 4 is admitted": {file: "failurepolicy-story4.yaml"},
		"KEP-104 Story 2 is admitted": {file: "startup-story2.yaml"},
		"a backoffLimit of 0 is denied with the fix": {
			file: "inplace-story1.yaml",
			edit: func(js *jobset.JobSet) {
				zero := int32(0)
				js.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = &zero
			},
			wantDeny:  []string{"inplace_restart: spec.replicatedJobs[0].template.spec.backoffLimit must be 2147483647"},
			wantWarns: []string{"inplace_restart:"},
		},
		"the KEPs' RestartPod action is denied with the fix": {
			file: "inplace-story1.yaml",
			edit: func(js *jobset.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].RestartPolicyRules[0].Action = "RestartPod"
			},
			wantDeny:  []string{"pod_template: spec.replicatedJobs[0].template.spec.template.spec.containers[0].restartPolicyRules[0].action \"RestartPod\" is not a container restart action: use RestartAllContainers"},
			wantWarns: []string{"inplace_restart:"},
		},
		"KEP-262 Story 4 under its original name is denied": {
			file:     "failurepolicy-story4.yaml",
			edit:     func(js *jobset.JobSet) { js.Name = "different-policies-for-different-replicated-jobs" },
			wantDeny: []string{"names: spec.replicatedJobs[1].name: the Job name"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: admitted(t, tc.file, tc.edit)})
			if err != nil {
				t.Fatal(err)
			}
			expectMessages(t, "denied", d.Denied, tc.wantDeny)
			expectMessages(t, "warned", d.Warned, tc.wantWarns)
		})
	}
}

// expectMessages checks that got has exactly one violation per prefix.
func expectMessages(t *testing.T, what string, got []Violation, prefixes []string) {
	t.Helper()
	if len(got) != len(prefixes) {
		t.Fatalf("%s %v, want %d messages starting with %q", what, got, len(prefixes), prefixes)
	}
	for _, p := range prefixes {
		found := false
		for _, v := range got {
			found = found || strings.HasPrefix(v.String(), p)
		}
		if !found {
			t.Errorf("%s %v: none starts with %q", what, got, p)
		}
	}
}

const maxRestartsPolicy = `package guardrails.maxrestarts

deny contains msg if {
	input.object.spec.failurePolicy.maxRestarts > input.parameters.limit
	msg := sprintf("spec.failurePolicy.maxRestarts %d exceeds the cluster limit %d", [input.object.spec.failurePolicy.maxRestarts, input.parameters.limit])
}

patch contains {"op": "add", "path": "/metadata/labels/team", "value": "unknown"} if {
	not input.object.metadata.labels.team
}
`

func TestAdminPolicies(t *testing.T) {
	e, err := NewEngine(BuiltinNamesOrDie(t))
	if err != nil {
		t.Fatal(err)
	}
	obj := admitted(t, "failurepolicy-story2.yaml", nil) // maxRestarts 10
	for _, tc := range []struct {
		action   EnforcementAction
		limit    int
		wantDeny int
		wantWarn int
		wantDry  int
	}{
		{Deny, 5, 1, 0, 0},
		{Deny, 10, 0, 0, 0},
		{Warn, 5, 0, 1, 0},
		// A DryRun policy's patch is recorded as what it would patch.
		{DryRun, 5, 0, 0, 2},
	} {
		p, err := Compile(Source{Name: "max-restarts", Rego: maxRestartsPolicy, Action: tc.action, Parameters: map[string]any{"limit": tc.limit}})
		if err != nil {
			t.Fatal(err)
		}
		e.SetPolicy(p)
		d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Denied) != tc.wantDeny || len(d.Warned) != tc.wantWarn || len(d.DryRun) != tc.wantDry {
			t.Errorf("%s limit %d: denied %v warned %v dry-run %v", tc.action, tc.limit, d.Denied, d.Warned, d.DryRun)
		}
		switch {
		case tc.action == DryRun:
			if len(d.Patches) != 0 || !strings.Contains(d.DryRun[len(d.DryRun)-1].Message, `would patch: {"op":"add","path":"/metadata/labels/team"`) {
				t.Errorf("DryRun: patches %v, dry-run %v: want none applied, and recorded", d.Patches, d.DryRun)
			}
		case len(d.Patches) != 1 || d.Patches[0].Op["path"] != "/metadata/labels/team" || d.Patches[0].Action != tc.action:
			t.Errorf("patches %v", d.Patches)
		}
	}
	if got := e.Policies(); len(got) != 1 {
		t.Errorf("policies %v: replacing a policy must not add one", got)
	}
	e.RemovePolicy("max-restarts")
	d, _ := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj})
	if len(d.Denied)+len(d.Warned)+len(d.DryRun)+len(d.Patches) != 0 {
		t.Errorf("removed policy still applies: %+v", d)
	}
}

func TestAdminPolicyMatch(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	p, err := Compile(Source{Name: "max-restarts", Rego: maxRestartsPolicy, Action: Deny, Match: func(in Input) bool { return in.Namespace == "prod" }, Parameters: map[string]any{"limit": 1}})
	if err != nil {
		t.Fatal(err)
	}
	e.SetPolicy(p)
	obj := admitted(t, "failurepolicy-story2.yaml", nil)
	for ns, want := range map[string]int{"prod": 1, "dev": 0} {
		d, _ := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj, Namespace: ns})
		if len(d.Denied) != want {
			t.Errorf("namespace %s: denied %v, want %d", ns, d.Denied, want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	cases := map[string]struct {
		src  string
		want string
	}{
		"syntax error names the line": {
			src:  "package p\n\ndeny contains msg if {\n\tmsg := \n}\n",
			want: "bad.rego:5",
		},
		"unsafe builtin is refused": {
			src:  "package p\n\ndeny contains msg if {\n\tr := http.send({\"method\": \"get\", \"url\": \"http://x\"})\n\tmsg := r.body\n}\n",
			want: "bad.rego:4: http.send is not allowed in a policy: it reaches the network",
		},
		"strict mode catches unused variables": {
			src:  "package p\n\ndeny contains \"x\" if {\n\tunused := 1\n\ttrue\n}\n",
			want: "bad.rego:4",
		},
		"no decision rule": {
			src:  "package p\n\nallow if true\n",
			want: "bad.rego: package p defines no deny, violation, warn or patch rule, so the policy would enforce nothing",
		},
		"reserved package": {
			src:  "package inplace.builtin.mine\n\ndeny contains \"x\" if true\n",
			want: "reserved",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(Source{Name: "bad", Rego: tc.src, Action: Deny})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDisabledBuiltins(t *testing.T) {
	if _, err := NewEngine([]string{"no_such_policy"}); err == nil || !strings.Contains(err.Error(), "not a built-in policy") {
		t.Errorf("unknown built-in name: error %v", err)
	}
	e, err := NewEngine([]string{"names"})
	if err != nil {
		t.Fatal(err)
	}
	obj := admitted(t, "failurepolicy-story4.yaml", func(js *jobset.JobSet) { js.Name = "different-policies-for-different-replicated-jobs" })
	d, _ := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj})
	if len(d.Denied) != 0 {
		t.Errorf("disabled built-in still denies: %v", d.Denied)
	}
}

// BuiltinNamesOrDie disables every built-in, to test admin policies alone.
func BuiltinNamesOrDie(t *testing.T) []string {
	t.Helper()
	names, err := BuiltinNames()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func BenchmarkEvaluateBuiltins(b *testing.B) {
	for _, admin := range []int{0, 16, 100} {
		for _, isolated := range []bool{false, true} {
			b.Run(fmt.Sprintf("admin=%d/isolated=%t", admin, isolated), func(b *testing.B) { benchmarkEvaluate(b, admin, isolated) })
		}
	}
}

// benchmarkEvaluate evaluates the built-ins and admin policies on a
// JobSet, in this process or isolated.
func benchmarkEvaluate(b *testing.B, admin int, isolated bool) {
	e, err := NewEngine(nil)
	if err != nil {
		b.Fatal(err)
	}
	if isolated {
		if err := e.Isolate(IsolationOptions{}); err != nil {
			b.Fatal(err)
		}
		defer e.Close()
	}
	for i := range admin {
		p, err := Compile(Source{Name: fmt.Sprintf("max-restarts-%d", i), Rego: maxRestartsPolicy, Parameters: map[string]any{"limit": 100}})
		if err != nil {
			b.Fatal(err)
		}
		e.SetPolicy(p)
	}
	obj := admitted(b, "inplace-story2.yaml", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj}); err != nil {
			b.Fatal(err)
		}
	}
}

// A policy whose evaluation fails counts as violated with its own
// enforcement action: only a Deny policy's error blocks a JobSet.
func TestEvaluationErrorKeepsTheEnforcementAction(t *testing.T) {
	const conflicting = `package guard

deny contains "never reached" if f == 3

# Two values for one complete rule: an evaluation error whenever the
# JobSet has a name.
f := 1 if input.object.metadata.name
f := 2 if input.object.metadata.name
`
	obj := map[string]any{"metadata": map[string]any{"name": "js"}}
	for _, action := range []EnforcementAction{Deny, Warn, DryRun} {
		t.Run(string(action), func(t *testing.T) {
			e, err := NewEngine(BuiltinNamesOrDie(t))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(Source{Name: "guard", Rego: conflicting, Action: action})
			if err != nil {
				t.Fatal(err)
			}
			e.SetPolicy(p)
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: obj})
			if err == nil {
				t.Errorf("the evaluation error is not reported")
			}
			got := map[EnforcementAction]int{Deny: len(d.Denied), Warn: len(d.Warned), DryRun: len(d.DryRun)}
			want := map[EnforcementAction]int{Deny: 0, Warn: 0, DryRun: 0}
			want[action] = 1
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("messages by action (-want +got):\n%s", diff)
			}
		})
	}
}

// An evaluation error of one built-in is that built-in's violation; every
// other built-in still decides, each under its own name.
func TestBuiltinErrorIsItsOwn(t *testing.T) {
	e, err := newEngine(map[string]string{
		"broken": "package inplace.builtin.broken\n\nx = input.object.a if true\n\nx = input.object.b if true\n\ndeny contains \"never\" if x == 0\n",
		"sound":  "package inplace.builtin.sound\n\ndeny contains \"no name\" if not input.object.metadata.name\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{"a": 1, "b": 2, "metadata": map[string]any{}}})
	if err == nil || !strings.Contains(err.Error(), "policy broken") {
		t.Errorf("error %v, want one naming the broken built-in", err)
	}
	var got []string
	for _, v := range d.Denied {
		got = append(got, v.Policy+": "+strings.SplitN(v.Message, ":", 2)[0])
	}
	if diff := cmp.Diff([]string{"broken: evaluation failed", "sound: no name"}, got); diff != "" {
		t.Errorf("denied (-want +got):\n%s", diff)
	}
}

func TestBuiltinPackageMustBeItsName(t *testing.T) {
	_, err := newEngine(map[string]string{"names": "package inplace.builtin.other\n\ndeny contains \"x\" if false\n"})
	if err == nil || !strings.Contains(err.Error(), "want inplace.builtin.names") {
		t.Errorf("error %v, want one naming the package the built-in must have", err)
	}
}

// Whatever shape a policy gives its decision rules, and whether or not any
// body holds, the other rules still decide: the query always has a result.
func TestDecisionRuleShapes(t *testing.T) {
	cases := map[string]struct {
		src       string
		wantDeny  []string
		wantWarns []string
	}{
		"a partial set none of whose bodies holds": {
			src:       "package p\n\ndeny contains \"x\" if false\n\nwarn contains \"w\" if true\n",
			wantWarns: []string{"p: w"},
		},
		"a partial set whose body holds": {
			src:       "package p\n\ndeny contains \"x\" if true\n\nwarn contains \"w\" if true\n",
			wantDeny:  []string{"p: x"},
			wantWarns: []string{"p: w"},
		},
		"a complete rule that is undefined": {
			src:       "package p\n\ndeny := {\"x\"} if false\n\nwarn contains \"w\" if true\n",
			wantWarns: []string{"p: w"},
		},
		"a complete rule that is defined": {
			src:       "package p\n\ndeny := {\"x\"} if true\n\nwarn contains \"w\" if true\n",
			wantDeny:  []string{"p: x"},
			wantWarns: []string{"p: w"},
		},
		"a complete patch rule that is undefined": {
			src:       "package p\n\npatch := [{\"op\": \"add\", \"path\": \"/a\", \"value\": 1}] if false\n\nwarn contains \"w\" if true\n",
			wantWarns: []string{"p: w"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := NewEngine(BuiltinNamesOrDie(t))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(Source{Name: "p", Rego: tc.src, Action: Deny})
			if err != nil {
				t.Fatal(err)
			}
			e.SetPolicy(p)
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{"metadata": map[string]any{}}})
			if err != nil {
				t.Fatal(err)
			}
			expectMessages(t, "denied", d.Denied, tc.wantDeny)
			expectMessages(t, "warned", d.Warned, tc.wantWarns)
		})
	}
}
