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

// podInputs returns an input per replicated Job of the JobSet in base
// (the request's input, baseInput's): its Pod template as a Pod (the
// template's metadata, with the JobSet's namespace and the name
// JOBSET-REPLICATEDJOB, and its spec), the replicated Job of the same name
// in the old JobSet as oldObject, the JobSet itself as input.jobSet and
// the replicated Job's name as input.replicatedJob. Every part is a term
// base holds already: the JobSet is converted once per request, whatever
// the number of PodTemplates policies.
func podInputs(in Input, base *ast.Term) []podInput {
	obj := base.Value.(ast.Object)
	jobSet, old := obj.Get(ast.StringTerm("object")), obj.Get(ast.StringTerm("oldObject"))
	if jobSet == nil {
		return []podInput{}
	}
	oldPods := map[string]*ast.Term{}
	if old != nil {
		for _, rj := range replicatedJobs(old) {
			oldPods[rj.name] = rj.pod(in)
		}
	}
	out := []podInput{}
	for _, rj := range replicatedJobs(jobSet) {
		extra := [][2]*ast.Term{
			{ast.StringTerm("jobSet"), jobSet},
			{ast.StringTerm("replicatedJob"), ast.StringTerm(rj.name)},
		}
		out = append(out, podInput{
			prefix: fmt.Sprintf("replicatedJobs[%s]: ", rj.name),
			input:  inputTerm(in, podKind, podName(in, rj.name), rj.pod(in), oldPods[rj.name], extra),
		})
	}
	return out
}

type replicatedJob struct {
	name     string
	template ast.Object // spec.template.spec.template
}

// replicatedJobs returns the Pod template of every replicated Job of a
// JobSet; a malformed one (the schema refuses it before a policy sees it)
// is skipped.
func replicatedJobs(jobSet *ast.Term) []replicatedJob {
	items, _ := find(jobSet, "spec", "replicatedJobs").(*ast.Array)
	if items == nil {
		return nil
	}
	var out []replicatedJob
	items.Foreach(func(rj *ast.Term) {
		name, _ := find(rj, "name").(ast.String)
		template, _ := find(rj, "template", "spec", "template").(ast.Object)
		if name != "" && template != nil {
			out = append(out, replicatedJob{name: string(name), template: template})
		}
	})
	return out
}

// find returns the value at path of objects in t, or nil.
func find(t *ast.Term, path ...string) ast.Value {
	v := t.Value
	for _, key := range path {
		obj, ok := v.(ast.Object)
		if !ok {
			return nil
		}
		next := obj.Get(ast.StringTerm(key))
		if next == nil {
			return nil
		}
		v = next.Value
	}
	return v
}

// pod is the replicated Job's template as a Pod of the JobSet's namespace:
// a new top level and metadata over the template's own terms.
func (rj replicatedJob) pod(in Input) *ast.Term {
	name, namespace := ast.StringTerm("name"), ast.StringTerm("namespace")
	meta := [][2]*ast.Term{{name, ast.StringTerm(podName(in, rj.name))}}
	if in.Namespace != "" {
		meta = append(meta, [2]*ast.Term{namespace, ast.StringTerm(in.Namespace)})
	}
	if m, ok := find(ast.NewTerm(rj.template), "metadata").(ast.Object); ok {
		m.Foreach(func(k, v *ast.Term) {
			if !k.Equal(name) && (in.Namespace == "" || !k.Equal(namespace)) {
				meta = append(meta, [2]*ast.Term{k, v})
			}
		})
	}
	pod := [][2]*ast.Term{
		{ast.StringTerm("apiVersion"), ast.StringTerm("v1")},
		{ast.StringTerm("kind"), ast.StringTerm("Pod")},
		{ast.StringTerm("metadata"), ast.ObjectTerm(meta...)},
	}
	if spec := rj.template.Get(ast.StringTerm("spec")); spec != nil {
		pod = append(pod, [2]*ast.Term{ast.StringTerm("spec"), spec})
	}
	return ast.ObjectTerm(pod...)
}

func podName(in Input, replicatedJob string) string {
	name := in.Name
	if name == "" {
		meta, _ := in.Object["metadata"].(map[string]any)
		name, _ = meta["name"].(string)
	}
	return name + "-" + replicatedJob
}
