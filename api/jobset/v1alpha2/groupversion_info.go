package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the JobSet API.
	GroupVersion = schema.GroupVersion{Group: "jobset.x-k8s.io", Version: "v1alpha2"}

	// SchemeBuilder registers the JobSet types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the JobSet types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind is the kind of the JobSet object.
const Kind = "JobSet"

// addKnownTypes registers the types with apimachinery's scheme builder
// directly, so that importing the API pulls in no controller-runtime.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &JobSet{}, &JobSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
