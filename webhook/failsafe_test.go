package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

var jobSetJSON = []byte(`{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":{"name":"js","namespace":"ns"},"spec":{"replicatedJobs":[{"name":"w","replicas":1,"template":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}}]}}`)

func engineWith(t *testing.T, src string) *policies.Engine {
	t.Helper()
	engine, err := policies.NewEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	if src != "" {
		p, err := policies.Compile(policies.Source{Name: "guard", Rego: src, Action: policies.Deny})
		if err != nil {
			t.Fatal(err)
		}
		engine.SetPolicy(p)
	}
	return engine
}

type handler interface {
	Handle(context.Context, admission.Request) admission.Response
}

// Until the policies are loaded, neither webhook admits anything.
func TestNothingIsAdmittedBeforeThePoliciesAreLoaded(t *testing.T) {
	ready := false
	opts := Options{Engine: engineWith(t, ""), Ready: func() bool { return ready }}
	for name, h := range map[string]handler{"mutating": NewMutator(opts), "validating": NewValidator(opts)} {
		ready = false
		resp := h.Handle(context.Background(), request(jobSetJSON))
		if resp.Allowed || resp.Result.Code != 503 || !strings.Contains(resp.Result.Message, "still loading the JobSetPolicies") {
			t.Errorf("%s, not ready: %+v, want refused with 503", name, resp.Result)
		}
		ready = true
		if resp := h.Handle(context.Background(), request(jobSetJSON)); !resp.Allowed {
			t.Errorf("%s, ready: refused: %+v", name, resp.Result)
		}
	}
}

// failingReader fails every read, as a cache or apiserver in trouble does.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

// A namespace whose labels cannot be read refuses the request: a policy
// selected by them would otherwise be skipped.
func TestNamespaceLookupThatFailsRefuses(t *testing.T) {
	opts := Options{Engine: engineWith(t, "package guard\n\ndeny contains \"x\" if false\n"), Reader: failingReader{}}
	for name, h := range map[string]handler{"mutating": NewMutator(opts), "validating": NewValidator(opts)} {
		resp := h.Handle(context.Background(), request(jobSetJSON))
		if resp.Allowed || !strings.Contains(resp.Result.Message, "reading namespace ns for the policies' namespace selectors: connection refused") {
			t.Errorf("%s: %+v, want refused naming the lookup", name, resp.Result)
		}
	}
	// Without admin policies too: one may be in force by the time the
	// engine evaluates.
	opts.Engine = engineWith(t, "")
	if resp := NewValidator(opts).Handle(context.Background(), request(jobSetJSON)); resp.Allowed {
		t.Errorf("no admin policy, failing reader: admitted")
	}
}

// An update is denied for what it brings, not for what the stored JobSet
// already had.
func TestUpdatesRatchet(t *testing.T) {
	engine := engineWith(t, "package guard\n\ndeny contains sprintf(\"tier %s is closed\", [t]) if {\n\tt := input.object.metadata.labels.tier\n\tt != \"open\"\n}\n")
	v := NewValidator(Options{Engine: engine})
	withLabels := func(labels string) []byte {
		return []byte(strings.Replace(string(jobSetJSON), `"namespace":"ns"`, `"namespace":"ns","labels":{`+labels+`}`, 1))
	}
	cases := map[string]struct {
		old, new    string
		allowed     bool
		wantWarning string
	}{
		"a new violation":                  {old: `"tier":"open"`, new: `"tier":"gold"`, allowed: false},
		"the same violation, untouched":    {old: `"tier":"gold"`, new: `"tier":"gold","team":"ml"`, allowed: true, wantWarning: "the stored JobSet had the same violation already"},
		"another value is a new violation": {old: `"tier":"gold"`, new: `"tier":"silver"`, allowed: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := request(withLabels(tc.new))
			req.Operation = admissionv1.Update
			req.OldObject.Raw = withLabels(tc.old)
			resp := v.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.wantWarning) {
				t.Errorf("warnings %q, want one containing %q", resp.Warnings, tc.wantWarning)
			}
		})
	}
}

func compiled(t *testing.T, name, src string, action policies.EnforcementAction) *policies.Policy {
	t.Helper()
	p, err := policies.Compile(policies.Source{Name: name, Rego: src, Action: action})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Patch rules: a DryRun policy's are recorded, not applied; a Warn
// policy's that cannot apply are skipped; a Deny policy's that cannot
// apply refuse; and they apply to updates too.
func TestPatchRulesHonourTheEnforcementAction(t *testing.T) {
	const labelTeam = "package p\n\npatch contains {\"op\": \"add\", \"path\": \"/metadata/labels/team\", \"value\": \"ml\"} if not input.object.metadata.labels.team\n"
	const broken = "package p\n\npatch contains {\"op\": \"replace\", \"path\": \"/spec/nothing/there\", \"value\": 1} if true\n"
	labels := func(raw []byte) map[string]any {
		t.Helper()
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		l, _ := obj["metadata"].(map[string]any)["labels"].(map[string]any)
		return l
	}
	cases := map[string]struct {
		policy      *policies.Policy
		wantErr     string
		wantTeamSet bool
	}{
		"Deny applies":          {policy: compiled(t, "team", labelTeam, policies.Deny), wantTeamSet: true},
		"Warn applies":          {policy: compiled(t, "team", labelTeam, policies.Warn), wantTeamSet: true},
		"DryRun leaves it be":   {policy: compiled(t, "team", labelTeam, policies.DryRun)},
		"a broken Warn skipped": {policy: compiled(t, "broken", broken, policies.Warn)},
		"a broken Deny refuses": {policy: compiled(t, "broken", broken, policies.Deny), wantErr: "applying the patch rules of broken"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			engine := engineWith(t, "")
			engine.SetPolicy(tc.policy)
			js, err := decode(jobSetJSON)
			if err != nil {
				t.Fatal(err)
			}
			mutated, err := Pipeline{Agent: configv1alpha1.Agent{}, Engine: engine}.Mutate(context.Background(), js, policies.Input{Operation: "CREATE"})
			raw := mutated.JSON
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := labels(raw)["team"] == "ml"; got != tc.wantTeamSet {
				t.Errorf("team label set %v, want %v", got, tc.wantTeamSet)
			}
		})
	}

	t.Run("on an update", func(t *testing.T) {
		engine := engineWith(t, "")
		engine.SetPolicy(compiled(t, "team", labelTeam, policies.Deny))
		req := request(jobSetJSON)
		req.Operation = admissionv1.Update
		req.OldObject.Raw = jobSetJSON
		resp := NewMutator(Options{Engine: engine}).Handle(context.Background(), req)
		if !resp.Allowed {
			t.Fatalf("refused: %+v", resp.Result)
		}
		found := false
		for _, op := range resp.Patches {
			found = found || strings.HasPrefix(op.Path, "/metadata/labels")
		}
		if !found {
			t.Errorf("patches %v, want the team label", resp.Patches)
		}
	})
}

// A Deny policy that cannot decide denies an update too, though it failed
// the same way on the stored JobSet.
func TestEvaluationFailuresDoNotRatchet(t *testing.T) {
	engine := engineWith(t, "package guard\n\nr := 1 if true\n\nr := 2 if true\n\ndeny contains \"x\" if r == 1\n")
	req := request(jobSetJSON)
	req.Operation = admissionv1.Update
	req.OldObject.Raw = jobSetJSON
	resp := NewValidator(Options{Engine: engine}).Handle(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "evaluation failed") {
		t.Errorf("%+v, want denied by the failed evaluation", resp.Result)
	}
}

// A JobSet being deleted sheds its finalizers whatever the patch rules
// say: the mutating webhook applies none to it.
func TestNoPatchRulesOnAJobSetBeingDeleted(t *testing.T) {
	engine := engineWith(t, "")
	engine.SetPolicy(compiled(t, "broken", "package p\n\npatch contains {\"op\": \"replace\", \"path\": \"/spec/nothing/there\", \"value\": 1} if true\n", policies.Deny))
	deleting := []byte(strings.Replace(string(jobSetJSON), `"namespace":"ns"`, `"namespace":"ns","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["example.com/hold"]`, 1))
	req := request(jobSetJSON)
	req.Object.Raw = []byte(strings.Replace(string(deleting), `,"finalizers":["example.com/hold"]`, "", 1))
	req.Operation = admissionv1.Update
	req.OldObject.Raw = deleting
	if resp := NewMutator(Options{Engine: engine}).Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("finalizer removal refused: %+v", resp.Result)
	}
	// The same update of a JobSet not being deleted is refused by the
	// Deny policy's broken patch.
	req.Object.Raw, req.OldObject.Raw = jobSetJSON, jobSetJSON
	if resp := NewMutator(Options{Engine: engine}).Handle(context.Background(), req); resp.Allowed {
		t.Error("a Deny policy's broken patch admitted an update")
	}
}

func TestPolicyValidator(t *testing.T) {
	policy := func(rego, params string) []byte {
		p := `{"apiVersion":"policy.inplace.dev/v1alpha1","kind":"JobSetPolicy","metadata":{"name":"p"},"spec":{"rego":` + strconvQuote(rego)
		if params != "" {
			p += `,"parameters":` + params
		}
		return []byte(p + `}}`)
	}
	good := policy("package p\n\ndeny contains \"x\" if input.parameters.on\n", `{"on":true}`)
	empty := policy("package p\n", "")
	cases := map[string]struct {
		op       admissionv1.Operation
		obj, old []byte
		want     string // "" allows
	}{
		"a good policy":                 {op: admissionv1.Create, obj: good},
		"no rule":                       {op: admissionv1.Create, obj: empty, want: "the policy would not be in force: spec.rego: p.rego: package p defines no deny, violation, warn or patch rule"},
		"an update to no rule":          {op: admissionv1.Update, obj: empty, old: good, want: "defines no deny"},
		"an update that keeps the spec": {op: admissionv1.Update, obj: empty, old: empty},
		"a match the selector refuses":  {op: admissionv1.Create, obj: []byte(strings.Replace(string(good), `"rego"`, `"match":{"labelSelector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]}},"rego"`, 1)), want: "the policy would not be in force: spec.match.labelSelector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := admission.Request{}
			req.Operation, req.Object.Raw, req.OldObject.Raw = tc.op, tc.obj, tc.old
			resp := NewPolicyValidator().Handle(context.Background(), req)
			switch {
			case tc.want == "" && !resp.Allowed:
				t.Errorf("refused: %v", resp.Result.Message)
			case tc.want != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tc.want)):
				t.Errorf("allowed %v, message %q, want refused with %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A patch rule that fails (an error, its time limit) fails closed for a
// Deny policy: the request is refused naming the policy and the error, and
// no policy's patch is applied. A Warn policy's is skipped with a warning
// and a DryRun policy's silently, and the others' patches still apply.
func TestPatchRulesThatFail(t *testing.T) {
	const labelTeam = "package team\n\npatch contains {\"op\": \"add\", \"path\": \"/metadata/labels/team\", \"value\": \"ml\"} if not input.object.metadata.labels.team\n"
	const conflicting = "package failing\n\nr := 1 if true\n\nr := 2 if true\n\npatch contains {\"op\": \"add\", \"path\": \"/metadata/labels/tier\", \"value\": \"gold\"} if r == 1\n"
	const endless = "package failing\n\npatch contains {\"op\": \"add\", \"path\": \"/metadata/labels/tier\", \"value\": \"gold\"} if {\n\tsome i in numbers.range(1, 1000000000)\n\ti < 0\n}\n"
	const broken = "package failing\n\npatch contains {\"op\": \"replace\", \"path\": \"/spec/nothing/there\", \"value\": 1} if true\n"
	cases := map[string]struct {
		src         string
		action      policies.EnforcementAction
		update      bool
		wantRefusal []string // empty: admitted, with the team label
		wantWarning string   // "" with wantRefusal empty: no warning
	}{
		"a Deny policy's rule errors": {
			src: conflicting, action: policies.Deny,
			wantRefusal: []string{"JobSet js denied by 1 policy violation(s): failing: evaluation failed", "produced conflicting values", "refuse the JobSet rather than admit it unpatched"},
		},
		"a Deny policy's rule errors on an update": {
			src: conflicting, action: policies.Deny, update: true,
			wantRefusal: []string{"failing: evaluation failed"},
		},
		"a Deny policy's rule times out": {
			src: endless, action: policies.Deny,
			wantRefusal: []string{"failing: evaluation failed: evaluation exceeded its time limit of 50ms"},
		},
		"a Deny policy's patch cannot apply": {
			src: broken, action: policies.Deny,
			wantRefusal: []string{"applying the patch rules of failing"},
		},
		"a Warn policy's rule errors": {
			src: conflicting, action: policies.Warn,
			wantWarning: "failing: evaluation failed: ",
		},
		"a Warn policy's rule times out": {
			src: endless, action: policies.Warn,
			wantWarning: "its patch rules were not applied",
		},
		"a Warn policy's patch cannot apply": {
			src: broken, action: policies.Warn,
			wantWarning: "applying the patch rules of failing",
		},
		"a DryRun policy's rule errors": {src: conflicting, action: policies.DryRun},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			engine := engineWith(t, "")
			engine.SetLimits(policies.Limits{PolicyTimeout: 50 * time.Millisecond})
			engine.SetPolicy(compiled(t, "team", labelTeam, policies.Deny))
			engine.SetPolicy(compiled(t, "failing", tc.src, tc.action))
			req := request(jobSetJSON)
			if tc.update {
				req.Operation = admissionv1.Update
				req.OldObject.Raw = jobSetJSON
			}
			resp := NewMutator(Options{Engine: engine}).Handle(context.Background(), req)
			if len(tc.wantRefusal) > 0 {
				if resp.Allowed || len(resp.Patches) > 0 {
					t.Fatalf("allowed %v with patches %v, want refused with nothing applied", resp.Allowed, resp.Patches)
				}
				for _, want := range tc.wantRefusal {
					if !strings.Contains(resp.Result.Message, want) {
						t.Errorf("refusal %q, want it to contain %q", resp.Result.Message, want)
					}
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			labelled := false
			for _, op := range resp.Patches {
				labelled = labelled || op.Path == "/metadata/labels" || op.Path == "/metadata/labels/team"
			}
			if !labelled {
				t.Errorf("patches %v, want the team label of the policy that did not fail", resp.Patches)
			}
			warnings := strings.Join(resp.Warnings, "\n")
			switch {
			case tc.wantWarning == "" && warnings != "":
				t.Errorf("warnings %q, want none", warnings)
			case !strings.Contains(warnings, tc.wantWarning):
				t.Errorf("warnings %q, want one containing %q", warnings, tc.wantWarning)
			}
		})
	}
}
