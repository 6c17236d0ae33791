package controller

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespaceTerminatingError(t *testing.T) {
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "js-w-0",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	refused.ErrStatus.Details.Causes = append(refused.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	if !namespaceTerminating(fmt.Errorf("creating jobs: %w", errors.Join(fmt.Errorf("js-w-0: %w", refused)))) {
		t.Error("a wrapped refusal of a terminating namespace: not recognised")
	}
	other := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "js-w-0", errors.New("quota exceeded"))
	if namespaceTerminating(other) || namespaceTerminating(nil) {
		t.Error("another refusal: taken for a terminating namespace")
	}
}
