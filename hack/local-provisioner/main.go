// Command local-provisioner is the local cluster's dynamic volume
// provisioner, what a kind cluster's local-path provisioner is to it: a
// claim of the default StorageClass gets a directory on this host, bound
// to the node its Pod was scheduled to. Every real node of the local
// cluster is a kubelet on this host, so the directory is the volume
// (hostPath). Built from sig-storage-lib-external-provisioner, the library
// external provisioners are written with, by
// hack/build-cluster-binaries.sh; test/cluster starts it beside CoreDNS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// hostPath provisions directories under root.
type hostPath struct {
	root string
}

var _ controller.Provisioner = hostPath{}

func (p hostPath) Provision(_ context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if opts.SelectedNodeName == "" {
		// The class binds on first consumer: the scheduler names the node.
		return nil, controller.ProvisioningFinished, errors.New("no node selected for the claim: the StorageClass must have volumeBindingMode WaitForFirstConsumer")
	}
	dir := filepath.Join(p.root, opts.PVName)
	// Any user of the Pod writes to it, as to a kind cluster's volumes.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	directory := corev1.HostPathDirectory
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			VolumeMode:                    opts.PVC.Spec.VolumeMode,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: opts.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			MountOptions:                  opts.StorageClass.MountOptions,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &directory},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{opts.SelectedNodeName},
				}}}},
			}},
		},
	}, controller.ProvisioningFinished, nil
}

func (p hostPath) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	// Only the directory Provision made for this volume: root/<name>.
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != filepath.Join(p.root, pv.Name) {
		return &controller.IgnoredError{Reason: "not a directory this provisioner made"}
	}
	return os.RemoveAll(pv.Spec.HostPath.Path)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's admin kubeconfig")
	root := flag.String("root", "", "the directory that holds the volumes")
	name := flag.String("provisioner", "", "the provisioner name StorageClasses give")
	flag.Parse()
	if *kubeconfig == "" || *root == "" || *name == "" {
		fmt.Fprintln(os.Stderr, "local-provisioner: --kubeconfig, --root and --provisioner are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*root, 0o755); err != nil {
		klog.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pc := controller.NewProvisionController(ctx, kubernetes.NewForConfigOrDie(cfg), *name, hostPath{root: filepath.Clean(*root)},
		// One process per cluster, its metrics unserved.
		controller.LeaderElection(false), controller.MetricsPort(0))
	pc.Run(ctx)
}
