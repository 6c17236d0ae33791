package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/config/crd"
	"github.com/inplace-dev/inplace/policies"
	"github.com/inplace-dev/inplace/webhook"
	"github.com/inplace-dev/inplace/webhook/inject"
)

// Result is the API server's answer to a create.
type Result struct {
	// Stored is the JobSet the API server would store, as JSON; set when
	// the request got as far as the mutating webhook's answer.
	Stored []byte
	// Injected says what the mutating webhook changed and why.
	Injected []inject.Decision
	// Policies is the validating webhook's decision; empty if the request
	// was refused before it.
	Policies policies.Decision
	// Refusal is the text of the API server's error when it refuses the
	// JobSet, empty when it accepts it.
	Refusal string
}

// Admitter plays the API server's create of a JobSet.
type Admitter struct {
	schema *crdSchema
	agent  configv1alpha1.Agent
	engine *policies.Engine
}

// NewAdmitter returns an Admitter with the shipped JobSet
// CustomResourceDefinition, the agent configuration the mutating webhook
// injects, and the policies the validating webhook enforces.
func NewAdmitter(agent configv1alpha1.Agent, engine *policies.Engine) (*Admitter, error) {
	s, err := newCRDSchema(crd.JobSet, jobset.GroupVersion.Version)
	if err != nil {
		return nil, err
	}
	return &Admitter{schema: s, agent: agent, engine: engine}, nil
}

// Create answers the creation of the JobSet in manifest (YAML or JSON) in
// namespace, when the manifest names none, as the API server answers a
// request with strict field validation (kubectl's default):
//
//  1. decode: unknown fields refused, the schema's defaults applied;
//  2. the mutating webhook: defaults, injection, admin patch rules;
//  3. decode its answer again: pruning and schema defaults;
//  4. the custom resource strategy: metadata, OpenAPI schema, list
//     types, CEL rules;
//  5. the validating webhook: built-in and admin policies.
func (a *Admitter) Create(ctx context.Context, manifest []byte, namespace string) (Result, error) {
	var res Result
	obj := map[string]any{}
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		return res, fmt.Errorf("reading the manifest: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	kind := a.schema.kind
	if u.GetKind() != kind.Kind || u.GetAPIVersion() != kind.GroupVersion().String() {
		return res, fmt.Errorf("the manifest is a %s %s, not a %s %s", u.GetAPIVersion(), u.GetKind(), kind.GroupVersion(), kind.Kind)
	}

	// 1. Decode, strictly.
	if unknown := structuralpruning.PruneWithOptions(obj, a.schema.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, p := range unknown {
			quoted[i] = fmt.Sprintf("unknown field %q", p)
		}
		res.Refusal = fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s", kind.Kind, kind.Version, kind.Kind, strings.Join(quoted, ", "))
		return res, nil
	}
	a.schema.decode(obj)

	// 2. The mutating webhook.
	raw, err := json.Marshal(obj)
	if err != nil {
		return res, err
	}
	var js jobset.JobSet
	if err := json.Unmarshal(raw, &js); err != nil {
		return res, fmt.Errorf("decoding the JobSet: %w", err)
	}
	in := policies.Input{Operation: "CREATE", Namespace: u.GetNamespace()}
	mutated, injected, err := webhook.Mutate(ctx, &js, a.agent, a.engine, in)
	if err != nil {
		res.Refusal = webhook.Refusal(webhook.MutatingWebhookName, err.Error())
		return res, nil
	}
	res.Injected = injected

	// 3. Decode the webhook's answer.
	obj = map[string]any{}
	if err := json.Unmarshal(mutated, &obj); err != nil {
		return res, err
	}
	a.schema.decode(obj)
	u = &unstructured.Unstructured{Object: obj}

	// 4. The custom resource strategy.
	a.schema.prepare(ctx, u)
	if err := a.schema.validate(ctx, u); err != nil {
		res.Refusal = err.Error()
		return res, nil
	}
	if res.Stored, err = json.Marshal(obj); err != nil {
		return res, err
	}

	// 5. The validating webhook.
	in.Object, in.Labels = obj, u.GetLabels()
	d, err := a.engine.Evaluate(ctx, in)
	if err != nil {
		return res, err
	}
	res.Policies = d
	if len(d.Denied) > 0 {
		res.Refusal = webhook.Refusal(webhook.ValidatingWebhookName, webhook.DenialMessage(u.GetName(), d.Denied))
	}
	return res, nil
}
