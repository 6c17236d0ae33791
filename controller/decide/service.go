package decide

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// buildService returns the headless Service that gives every Pod the DNS
// name <pod hostname>.<subdomain>.
func buildService(js *jobset.JobSet) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Subdomain(js),
			Namespace:       js.Namespace,
			Labels:          map[string]string{jobset.JobSetNameKey: js.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobset.GroupVersion.WithKind(jobset.Kind))},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{jobset.JobSetNameKey: js.Name},
			PublishNotReadyAddresses: js.Spec.Network == nil || ptr.Deref(js.Spec.Network.PublishNotReadyAddresses, true),
		},
	}
}
