package migration

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/config/crd"
	"github.com/inplace-dev/inplace/controller/coexist"
)

// Options say where to look.
type Options struct {
	// UpstreamNamespace is where upstream JobSet runs; default
	// jobset-system.
	UpstreamNamespace string
	// Namespace is where inplace runs; default inplace-system.
	Namespace string
	// Now is the time Leases are judged at; default the current time.
	Now time.Time
}

// ManagerDeployments are inplace's Deployments, as config/default and the
// chart name them. The drop-in install (config/jobset-names) runs one, in
// the upstream namespace under upstream's name.
var ManagerDeployments = []string{"inplace-manager", "inplace-webhook"}

// NameLabel and Name mark inplace's Deployments, whatever their name.
const (
	NameLabel = "app.kubernetes.io/name"
	Name      = "inplace"
)

// Gather reads what Check needs, with gets by name but for the JobSets
// and their Jobs, listed in every namespace.
func Gather(ctx context.Context, c client.Reader, opts Options) (Inputs, error) {
	if opts.UpstreamNamespace == "" {
		opts.UpstreamNamespace = coexist.UpstreamNamespace
	}
	if opts.Namespace == "" {
		opts.Namespace = "inplace-system"
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	in := Inputs{Now: opts.Now, UpstreamNamespace: opts.UpstreamNamespace, Namespace: opts.Namespace}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	switch err := c.Get(ctx, types.NamespacedName{Name: coexist.CRDName}, u); {
	case apierrors.IsNotFound(err):
		in.CRD = coexist.InspectCRD(nil)
	case err != nil:
		return in, fmt.Errorf("reading the CustomResourceDefinition %s: %w", coexist.CRDName, err)
	default:
		var installed apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &installed); err != nil {
			return in, err
		}
		in.CRD = coexist.InspectCRD(&installed)
	}

	for _, name := range coexist.UpstreamLeaseNames {
		var l coordinationv1.Lease
		found, err := get(ctx, c, opts.UpstreamNamespace, name, &l)
		if err != nil {
			return in, err
		}
		if found {
			in.Leases = append(in.Leases, coexist.InspectLease(&l, opts.Now))
		}
	}
	// inplace's drop-in install (config/jobset-names) runs under an
	// upstream Deployment's name: labelled as ours, it is inplace.
	var dropIn []Deployment
	for _, name := range coexist.UpstreamDeployments {
		d, err := deployment(ctx, c, opts.UpstreamNamespace, name)
		if err != nil {
			return in, err
		}
		switch {
		case d.Ours:
			dropIn = append(dropIn, d)
		case d.Found:
			in.Upstream = append(in.Upstream, d)
		}
	}
	for _, w := range []struct {
		kind string
		obj  client.Object
		name string
	}{
		{"mutatingwebhookconfiguration", &admissionregistrationv1.MutatingWebhookConfiguration{}, coexist.UpstreamMutatingWebhook},
		{"validatingwebhookconfiguration", &admissionregistrationv1.ValidatingWebhookConfiguration{}, coexist.UpstreamValidatingWebhook},
	} {
		found, err := get(ctx, c, "", w.name, w.obj)
		if err != nil {
			return in, err
		}
		if found {
			in.Webhooks = append(in.Webhooks, w.kind+"/"+w.name)
		}
	}
	in.Manager = dropIn
	if len(dropIn) == 0 {
		for _, name := range ManagerDeployments {
			d, err := deployment(ctx, c, opts.Namespace, name)
			if err != nil {
				return in, err
			}
			in.Manager = append(in.Manager, d)
		}
	}

	if !in.CRD.Installed || !in.CRD.Served {
		return in, nil
	}
	var err error
	in.JobSets, err = jobSets(ctx, c)
	return in, err
}

// get reads one object by name; found is false when it does not exist.
func get(ctx context.Context, c client.Reader, namespace, name string, obj client.Object) (found bool, err error) {
	err = c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return true, nil
}

func deployment(ctx context.Context, c client.Reader, namespace, name string) (Deployment, error) {
	var d appsv1.Deployment
	found, err := get(ctx, c, namespace, name, &d)
	out := Deployment{Namespace: namespace, Name: name, Found: found}
	if found {
		out.Replicas, out.Running, out.Available = ptr.Deref(d.Spec.Replicas, 1), d.Status.Replicas, d.Status.AvailableReplicas
		out.Ours = d.Labels[NameLabel] == Name
	}
	return out, err
}

// jobSets lists every JobSet as stored, the fields our schema lacks, and
// the Jobs each controls.
func jobSets(ctx context.Context, c client.Reader) ([]JobSet, error) {
	var ours apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.JobSet, &ours); err != nil {
		return nil, fmt.Errorf("reading inplace's JobSet CRD: %w", err)
	}
	schema := ours.Spec.Versions[0].Schema.OpenAPIV3Schema

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(jobset.GroupVersion.WithKind("JobSetList"))
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing JobSets: %w", err)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.HasLabels{jobset.JobSetNameKey}); err != nil {
		return nil, fmt.Errorf("listing the JobSets' Jobs: %w", err)
	}
	byOwner := map[types.UID][]batchv1.Job{}
	for _, job := range jobs.Items {
		if ref := metav1.GetControllerOf(&job); ref != nil && ref.Kind == jobset.Kind {
			byOwner[ref.UID] = append(byOwner[ref.UID], job)
		}
	}
	out := make([]JobSet, 0, len(list.Items))
	for _, item := range list.Items {
		js := &jobset.JobSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, js); err != nil {
			return nil, fmt.Errorf("JobSet %s/%s: %w", item.GetNamespace(), item.GetName(), err)
		}
		out = append(out, JobSet{JobSet: js, Undeclared: undeclared(item.Object, schema), Jobs: byOwner[js.UID]})
	}
	return out, nil
}
