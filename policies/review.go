package policies

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A policy's input has the engine's own fields (operation, object,
// oldObject, parameters) and, beside them, review: the admission request
// in the shape Gatekeeper gives its policies, so that a policy written for
// Gatekeeper (input.review.object, input.review.userInfo) reads it
// unchanged. Both name the same terms: nothing is converted twice.

// groupVersionKind is review.kind's shape.
type groupVersionKind struct{ group, version, kind, resource string }

var (
	jobSetKind = groupVersionKind{"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"}
	podKind    = groupVersionKind{"", "v1", "Pod", "pods"}
)

// inputTerm is a policy's input: object and old (either may be nil) as the
// request gives them, extra added at the top level.
func inputTerm(in Input, kind groupVersionKind, name string, object, old *ast.Term, extra [][2]*ast.Term) *ast.Term {
	review := [][2]*ast.Term{
		{ast.StringTerm("kind"), ast.ObjectTerm(
			[2]*ast.Term{ast.StringTerm("group"), ast.StringTerm(kind.group)},
			[2]*ast.Term{ast.StringTerm("version"), ast.StringTerm(kind.version)},
			[2]*ast.Term{ast.StringTerm("kind"), ast.StringTerm(kind.kind)},
		)},
		{ast.StringTerm("resource"), ast.ObjectTerm(
			[2]*ast.Term{ast.StringTerm("group"), ast.StringTerm(kind.group)},
			[2]*ast.Term{ast.StringTerm("version"), ast.StringTerm(kind.version)},
			[2]*ast.Term{ast.StringTerm("resource"), ast.StringTerm(kind.resource)},
		)},
		{ast.StringTerm("name"), ast.StringTerm(name)},
		{ast.StringTerm("namespace"), ast.StringTerm(in.Namespace)},
		{ast.StringTerm("operation"), ast.StringTerm(in.Operation)},
		{ast.StringTerm("dryRun"), ast.BooleanTerm(in.DryRun)},
		{ast.StringTerm("userInfo"), userInfoTerm(in.UserInfo)},
	}
	items := [][2]*ast.Term{{ast.StringTerm("operation"), ast.StringTerm(in.Operation)}}
	if object != nil {
		items = append(items, [2]*ast.Term{ast.StringTerm("object"), object})
		review = append(review, [2]*ast.Term{ast.StringTerm("object"), object})
	}
	if old != nil {
		items = append(items, [2]*ast.Term{ast.StringTerm("oldObject"), old})
		review = append(review, [2]*ast.Term{ast.StringTerm("oldObject"), old})
	}
	items = append(items, [2]*ast.Term{ast.StringTerm("review"), ast.ObjectTerm(review...)})
	items = append(items, extra...)
	return ast.ObjectTerm(items...)
}

func userInfoTerm(u *UserInfo) *ast.Term {
	if u == nil {
		return ast.ObjectTerm()
	}
	groups := make([]*ast.Term, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = ast.StringTerm(g)
	}
	extra := make([][2]*ast.Term, 0, len(u.Extra))
	for k, vs := range u.Extra {
		values := make([]*ast.Term, len(vs))
		for i, v := range vs {
			values[i] = ast.StringTerm(v)
		}
		extra = append(extra, [2]*ast.Term{ast.StringTerm(k), ast.ArrayTerm(values...)})
	}
	return ast.ObjectTerm(
		[2]*ast.Term{ast.StringTerm("username"), ast.StringTerm(u.Username)},
		[2]*ast.Term{ast.StringTerm("uid"), ast.StringTerm(u.UID)},
		[2]*ast.Term{ast.StringTerm("groups"), ast.ArrayTerm(groups...)},
		[2]*ast.Term{ast.StringTerm("extra"), ast.ObjectTerm(extra...)},
	)
}

// podInput is the input of a PodTemplates policy for one replicated Job.
type podInput struct {
	// prefix starts each message, naming the replicated Job.
	prefix string
	input  *ast.Term
}

// podInputs returns an input per replicated Job of the JobSet in in: its
// Pod template as a Pod (the template's metadata, with the JobSet's
// namespace and the name JOBSET-REPLICATEDJOB, and its spec), the
// replicated Job of the same name in the old JobSet as oldObject, the
// JobSet itself as input.jobSet and the replicated Job's name as
// input.replicatedJob.
func podInputs(in Input) ([]podInput, error) {
	jobSet, err := ast.InterfaceToValue(in.Object)
	if err != nil {
		return nil, fmt.Errorf("converting object: %w", err)
	}
	oldPods := map[string]map[string]any{}
	for _, rj := range replicatedJobs(in.OldObject) {
		oldPods[rj.name] = rj.pod(in)
	}
	out := []podInput{}
	for _, rj := range replicatedJobs(in.Object) {
		pod, err := ast.InterfaceToValue(rj.pod(in))
		if err != nil {
			return nil, fmt.Errorf("converting the Pod template of replicated Job %s: %w", rj.name, err)
		}
		var old *ast.Term
		if o, ok := oldPods[rj.name]; ok {
			v, err := ast.InterfaceToValue(o)
			if err != nil {
				return nil, fmt.Errorf("converting the old Pod template of replicated Job %s: %w", rj.name, err)
			}
			old = ast.NewTerm(v)
		}
		extra := [][2]*ast.Term{
			{ast.StringTerm("jobSet"), ast.NewTerm(jobSet)},
			{ast.StringTerm("replicatedJob"), ast.StringTerm(rj.name)},
		}
		out = append(out, podInput{
			prefix: fmt.Sprintf("replicatedJobs[%s]: ", rj.name),
			input:  inputTerm(in, podKind, podName(in, rj.name), ast.NewTerm(pod), old, extra),
		})
	}
	return out, nil
}

type replicatedJob struct {
	name     string
	template map[string]any // spec.template.spec.template
}

// replicatedJobs returns the Pod template of every replicated Job of a
// JobSet given as JSON values; a malformed one (the schema refuses it
// before a policy sees it) is skipped.
func replicatedJobs(obj map[string]any) []replicatedJob {
	spec, _ := obj["spec"].(map[string]any)
	items, _ := spec["replicatedJobs"].([]any)
	var out []replicatedJob
	for _, it := range items {
		rj, _ := it.(map[string]any)
		name, _ := rj["name"].(string)
		job, _ := rj["template"].(map[string]any)
		jobSpec, _ := job["spec"].(map[string]any)
		template, _ := jobSpec["template"].(map[string]any)
		if name == "" || template == nil {
			continue
		}
		out = append(out, replicatedJob{name: name, template: template})
	}
	return out
}

// pod is the replicated Job's template as a Pod of the JobSet's namespace.
func (rj replicatedJob) pod(in Input) map[string]any {
	meta := map[string]any{}
	if m, ok := rj.template["metadata"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	meta["name"] = podName(in, rj.name)
	if in.Namespace != "" {
		meta["namespace"] = in.Namespace
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta}
	if spec, ok := rj.template["spec"]; ok {
		pod["spec"] = spec
	}
	return pod
}

func podName(in Input, replicatedJob string) string {
	name := in.Name
	if name == "" {
		meta, _ := in.Object["metadata"].(map[string]any)
		name, _ = meta["name"].(string)
	}
	return name + "-" + replicatedJob
}
