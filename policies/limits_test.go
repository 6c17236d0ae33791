package policies

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
)

// A builtin that panics, registered for this test binary only: nothing in
// OPA panics on purpose, and the engine must survive the day something
// does.
func init() {
	rego.RegisterBuiltin1(&rego.Function{Name: "inplace_test.panic", Decl: types.NewFunction(types.Args(types.A), types.B)},
		func(rego.BuiltinContext, *ast.Term) (*ast.Term, error) { panic("a bug in a builtin") })
	// On the sandbox's list, for this test binary too, so that a policy
	// may call it.
	allowedBuiltins["inplace_test.panic"] = true
}

// endless runs well past any limit, checking OPA's cancellation as it goes.
const endless = `package slow

deny contains "never" if {
	some i in numbers.range(1, 1000000000)
	i < 0
}
`

func compileOrDie(t *testing.T, name, src string, action EnforcementAction) *Policy {
	t.Helper()
	p, err := Compile(Source{Name: name, Rego: src, Action: action})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyTimeoutKeepsTheEnforcementAction(t *testing.T) {
	cases := map[EnforcementAction]func(Decision) []Violation{
		Deny:   func(d Decision) []Violation { return d.Denied },
		Warn:   func(d Decision) []Violation { return d.Warned },
		DryRun: func(d Decision) []Violation { return d.DryRun },
	}
	for action, got := range cases {
		t.Run(string(action), func(t *testing.T) {
			e, _ := NewEngine(BuiltinNamesOrDie(t))
			e.SetLimits(Limits{PolicyTimeout: 50 * time.Millisecond})
			e.SetPolicy(compileOrDie(t, "slow", endless, action))
			start := time.Now()
			d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("evaluation took %v with a 50ms limit", took)
			}
			if err == nil || !strings.Contains(err.Error(), "exceeded its time limit") {
				t.Errorf("error %v, want the time limit named", err)
			}
			vs := got(d)
			if len(vs) != 1 || !strings.Contains(vs[0].Message, "evaluation failed") {
				t.Errorf("%s: %+v, want one failed evaluation", action, d)
			}
			if action != Deny && len(d.Denied) != 0 {
				t.Errorf("a %s policy that timed out denied: %v", action, d.Denied)
			}
		})
	}
}

// TestTotalTimeoutBoundsEveryPolicy: ten slow policies cost the request
// its total limit, not ten policy limits.
func TestTotalTimeoutBoundsEveryPolicy(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	e.SetLimits(Limits{PolicyTimeout: time.Second, TotalTimeout: 100 * time.Millisecond})
	for i := range 10 {
		e.SetPolicy(compileOrDie(t, fmt.Sprintf("slow-%d", i), strings.Replace(endless, "package slow", fmt.Sprintf("package slow%d", i), 1), Deny))
	}
	start := time.Now()
	d, _ := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("ten slow policies took %v under a 100ms total limit", took)
	}
	if len(d.Denied) != 10 {
		t.Errorf("denied %d, want every slow Deny policy to deny: %v", len(d.Denied), d.Denied)
	}
}

func TestPanicIsAnEvaluationFailure(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	e.SetPolicy(compileOrDie(t, "panics", "package panics\n\ndeny contains \"x\" if inplace_test.panic(input)\n", Deny))
	e.SetPolicy(compileOrDie(t, "fine", "package fine\n\ndeny contains \"fine denies\" if input.operation == \"CREATE\"\n", Deny))
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "panicked: a bug in a builtin") {
		t.Errorf("error %v, want the panic", err)
	}
	want := map[string]bool{"panics": true, "fine": true}
	for _, v := range d.Denied {
		delete(want, v.Policy)
	}
	if len(want) != 0 {
		t.Errorf("denied %v: the panicking policy must deny, the other must still decide", d.Denied)
	}
}

func TestHealthAfterFailuresInARow(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	e.SetLimits(Limits{PolicyTimeout: 20 * time.Millisecond})
	var changes atomic.Int32
	e.OnHealthChange(func(policy string) {
		if policy == "slow" {
			changes.Add(1)
		}
	})
	e.SetPolicy(compileOrDie(t, "slow", endless, Deny))
	in := Input{Operation: "CREATE", Object: map[string]any{}}
	for i := range unhealthyAfter {
		if h := e.Health("slow"); h.Failing {
			t.Fatalf("failing after %d failures, want %d in a row first", i, unhealthyAfter)
		}
		_, _ = e.Evaluate(context.Background(), in)
	}
	h := e.Health("slow")
	if !h.Failing || h.Reason != "timeout" || !strings.Contains(h.Message, "time limit") {
		t.Errorf("health %+v, want failing with reason timeout", h)
	}
	if n := changes.Load(); n != 1 {
		t.Errorf("%d health changes, want 1", n)
	}
	// A new version of the policy is judged on its own evaluations.
	e.SetPolicy(compileOrDie(t, "slow", "package slow\n\ndeny contains \"x\" if false\n", Deny))
	_, _ = e.Evaluate(context.Background(), in)
	if h := e.Health("slow"); h.Failing {
		t.Errorf("health %+v after a fixed version evaluated", h)
	}
}

func TestMessagesAreBounded(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	// Not a test of time: a loaded machine must not fail it.
	e.SetLimits(Limits{PolicyTimeout: time.Minute, TotalTimeout: time.Minute})
	e.SetPolicy(compileOrDie(t, "loud", `package loud

deny contains sprintf("message %03d %02000d", [i, 0]) if {
	some i in numbers.range(1, 100)
}
`, Deny))
	d, err := e.Evaluate(context.Background(), Input{Operation: "CREATE", Object: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Denied) != maxMessagesPerPolicy+1 {
		t.Fatalf("%d messages, want %d and a count of the rest", len(d.Denied), maxMessagesPerPolicy+1)
	}
	if last := d.Denied[maxMessagesPerPolicy].Message; last != "... and 80 more" {
		t.Errorf("last message %q", last)
	}
	for _, v := range d.Denied[:maxMessagesPerPolicy] {
		if len(v.Message) > maxMessageBytes || !strings.HasSuffix(v.Message, cutMark) {
			t.Errorf("message of %d bytes not cut: %.40q", len(v.Message), v.Message)
		}
	}
}

// The audit's evaluations, cut short by its own budget, say nothing of a
// policy's health.
func TestAuditEvaluationsDoNotJudgeHealth(t *testing.T) {
	e, _ := NewEngine(BuiltinNamesOrDie(t))
	e.SetLimits(Limits{PolicyTimeout: 10 * time.Millisecond})
	e.SetPolicy(compileOrDie(t, "slow", endless, Deny))
	for range unhealthyAfter + 1 {
		_, _ = e.Audit(context.Background(), Input{Operation: "AUDIT", Object: map[string]any{}})
	}
	if h := e.Health("slow"); h.Evaluated || h.Failing {
		t.Errorf("health %+v after audits only", h)
	}
}
