package review

import (
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/inplace-dev/inplace/policies"
)

// FromRequest is the input of an admission request: object and old are
// its object and old object as JSON values (either may be nil: the
// mutating webhook adds the object at each pass), nsLabels the labels of
// its namespace.
func FromRequest(req *admissionv1.AdmissionRequest, object, old map[string]any, nsLabels map[string]string) policies.Input {
	return input(inputOf{
		operation: string(req.Operation), object: object, old: old,
		name: req.Name, namespace: req.Namespace, nsLabels: nsLabels,
		user: &policies.UserInfo{
			Username: req.UserInfo.Username,
			UID:      req.UserInfo.UID,
			Groups:   req.UserInfo.Groups,
			Extra:    extraOf(req.UserInfo.Extra),
		},
		dryRun: req.DryRun != nil && *req.DryRun,
	})
}

// Offline is the input of a JobSet judged without a request: the audit
// (operation policies.OperationAudit) and the offline tools (CREATE or
// UPDATE, user the requesting user they play, or nil). Its name is the
// object's, as a request's is; the namespace's labels are left to the
// policies' matchers to look up.
func Offline(operation, namespace string, object, old map[string]any, user *policies.UserInfo) policies.Input {
	return input(inputOf{operation: operation, object: object, old: old, name: nameOf(object), namespace: namespace, user: user})
}

// WithObject is in with object as the JobSet judged: each pass of the
// mutating webhook, and the validating webhook after them, judge the
// JobSet as it stands then. Its labels, which the policies' label
// selectors match, are always the object's.
func WithObject(in policies.Input, object map[string]any) policies.Input {
	in.Object, in.Labels = object, labelsOf(object)
	return in
}

// inputOf are the parts of an input, whatever its origin.
type inputOf struct {
	operation       string
	object, old     map[string]any
	name, namespace string
	nsLabels        map[string]string
	user            *policies.UserInfo
	dryRun          bool
}

// input is the one place an engine input is made.
func input(o inputOf) policies.Input {
	return policies.Input{
		Operation:       o.operation,
		Object:          o.object,
		OldObject:       o.old,
		Labels:          labelsOf(o.object),
		Name:            o.name,
		Namespace:       o.namespace,
		NamespaceLabels: o.nsLabels,
		UserInfo:        o.user,
		DryRun:          o.dryRun,
	}
}

func extraOf(extra map[string]authenticationv1.ExtraValue) map[string][]string {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string][]string, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// labelsOf returns metadata.labels of a JobSet given as JSON values.
func labelsOf(obj map[string]any) map[string]string {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k], _ = v.(string)
	}
	return out
}

// nameOf returns metadata.name of a JobSet given as JSON values.
func nameOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}
