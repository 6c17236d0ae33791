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
	"github.com/inplace-dev/inplace/policies/review"
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
	schema   *crdSchema
	pipeline webhook.Pipeline
}

// NewAdmitter returns an Admitter with the shipped JobSet
// CustomResourceDefinition, the agent configuration the mutating webhook
// injects, and the policies the validating webhook enforces.
func NewAdmitter(agent configv1alpha1.Agent, engine *policies.Engine) (*Admitter, error) {
	s, err := newCRDSchema(crd.JobSet, jobset.GroupVersion.Version)
	if err != nil {
		return nil, err
	}
	return &Admitter{schema: s, pipeline: webhook.Pipeline{Agent: agent, Engine: engine}}, nil
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
//
// Steps 2 to 5 are the admission pipeline the webhooks run
// (webhook.Pipeline), with steps 3 and 4 as its store.
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

	// 2-5. The webhooks, with the API server's own steps between them.
	raw, err := json.Marshal(obj)
	if err != nil {
		return res, err
	}
	var js jobset.JobSet
	if err := json.Unmarshal(raw, &js); err != nil {
		return res, fmt.Errorf("decoding the JobSet: %w", err)
	}
	in := review.Offline("CREATE", u.GetNamespace(), obj, nil, nil)
	v, err := a.pipeline.Admit(ctx, &js, in, a.store)
	res.Injected, res.Policies, res.Refusal = v.Mutated.Injected, v.Policies, v.Refusal
	if err != nil {
		return res, err
	}
	if v.Object != nil {
		res.Stored, err = json.Marshal(v.Object)
	}
	return res, err
}

// store is what the API server does with the mutating webhook's answer:
// decode it again (pruning and the schema's defaults), then the custom
// resource strategy (metadata, OpenAPI schema, list types, CEL rules).
func (a *Admitter) store(ctx context.Context, mutated []byte) (map[string]any, error) {
	obj := map[string]any{}
	if err := json.Unmarshal(mutated, &obj); err != nil {
		return nil, err
	}
	a.schema.decode(obj)
	u := &unstructured.Unstructured{Object: obj}
	a.schema.prepare(ctx, u)
	if err := a.schema.validate(ctx, u); err != nil {
		return nil, &webhook.Refused{Message: err.Error()}
	}
	return obj, nil
}
