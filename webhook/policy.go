package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies/jobsetpolicy"
)

// ValidatePolicyPath is the path of the JobSetPolicy webhook.
const ValidatePolicyPath = "/validate-policy-inplace-dev-v1alpha1-jobsetpolicy"

// PolicyValidator refuses a JobSetPolicy that would not be in force: one
// whose Rego does not compile in the sandbox, calls a denied builtin,
// defines no rule, or whose match or parameters are invalid. Without it
// such a policy is stored, reports Ready=False afterwards, and enforces
// nothing (or its last good version) while its author believes it does.
// The controller compiles every policy again, so a policy stored before
// this webhook existed, or while it was down, is still reported.
type PolicyValidator struct {
	metrics *admissionMetrics
}

// NewPolicyValidator returns the JobSetPolicy webhook's handler.
func NewPolicyValidator() *PolicyValidator { return &PolicyValidator{} }

// Handle compiles the policy as the controller will.
func (v *PolicyValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := v.handle(req)
	v.metrics.observe("validate-policy", resp, time.Since(start))
	return resp
}

func (v *PolicyValidator) handle(req admission.Request) admission.Response {
	var p policyv1alpha1.JobSetPolicy
	if err := json.Unmarshal(req.Object.Raw, &p); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		var old policyv1alpha1.JobSetPolicy
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		// An update that leaves the spec alone (labels, finalizers) is
		// never blocked, even for a policy a newer engine no longer
		// compiles: its status says so already.
		if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
			return admission.Allowed("")
		}
	}
	if _, err := jobsetpolicy.Admit(p.Name, &p.Spec, nil, nil); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}
