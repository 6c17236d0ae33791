package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real nodes' storage, what a kind cluster gives: a default
// StorageClass whose claims get a directory of this host, provisioned by
// hack/local-provisioner once the scheduler has placed the claim's first
// Pod. Suites written for kind (upstream JobSet's VolumeClaimPolicies
// spec) create claims without a class and wait for them to bind.
const (
	// DefaultStorageClass is the default class's name, kind's.
	DefaultStorageClass = "standard"
	// LocalProvisioner is its provisioner's name.
	LocalProvisioner  = "local-cluster.inplace.dev/host-path"
	provisionerBinary = "local-provisioner"
)

// startStorage creates the default StorageClass and starts its
// provisioner, which keeps the volumes under the cluster's directory.
func (c *Cluster) startStorage(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       LocalProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the default StorageClass %s: %w", DefaultStorageClass, err)
	}
	_, err = c.start(provisionerBinary, []string{"--kubeconfig", c.Kubeconfig, "--root", filepath.Join(c.workDir, "volumes"), "--provisioner", LocalProvisioner})
	return err
}
