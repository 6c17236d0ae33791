package realnode

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/images"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("volumeClaimPolicies on real kubelets", func() {
	It("give the Pods a claim the controller created, bound and mounted by the kubelet, and the claim goes with the JobSet", func() {
		ns := specNamespace()
		// No provisioner runs here: a volume of the host, made for the
		// claim the JobSet will get (<template>-<jobset>), stands in for
		// one. Every real node is a kubelet of this host, so the test reads
		// what any of them mounted.
		dir := GinkgoT().TempDir()
		// Writable by the worker, whatever user its image runs as.
		Expect(os.Chmod(dir, 0o777)).To(Succeed())
		const claimName = "data-claims"
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "inplace-e2e-"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "inplace-e2e",
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns.Name, Name: claimName},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
				}},
			},
		}
		Expect(k8sClient.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pv))).To(Succeed())
		})

		rj := wrappers.MakeReplicatedJob("workers").Obj()
		pod := &rj.Template.Spec.Template.Spec
		pod.TerminationGracePeriodSeconds = ptr.To[int64](5)
		pod.Containers[0].Image = images.Worker
		// The worker records that it started in its temporary directory:
		// here, the claim.
		pod.Containers[0].Env = []corev1.EnvVar{{Name: "BARRIER_URL", Value: "none"}, {Name: "TMPDIR", Value: "/data"}}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		js := wrappers.MakeJobSet("claims", ns.Name).ReplicatedJob(rj).Obj()
		js.Spec.VolumeClaimPolicies = []jobset.VolumeClaimPolicy{{
			Templates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr.To("inplace-e2e"),
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
				},
			}},
		}}
		Expect(k8sClient.Create(ctx, js)).To(Succeed())

		Eventually(func(g Gomega) {
			var claim corev1.PersistentVolumeClaim
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: claimName}, &claim)).To(Succeed())
			g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
			g.Expect(claim.Spec.VolumeName).To(Equal(pv.Name))
			g.Expect(metav1.IsControlledBy(&claim, getJobSet(js))).To(BeTrue(), "whenDeleted Delete: the JobSet owns its claim")
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func() error {
			_, err := os.Stat(filepath.Join(dir, "inplace-testworker.started"))
			return err
		}).WithTimeout(timeout).Should(Succeed(), "the worker wrote into the claim the kubelet mounted")
		Expect(podsOf(js)).NotTo(BeEmpty())
		for _, p := range podsOf(js) {
			Expect(p.Spec.Volumes).To(ContainElement(HaveField("PersistentVolumeClaim.ClaimName", claimName)))
		}

		Expect(k8sClient.Delete(ctx, js)).To(Succeed())
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: claimName}, &corev1.PersistentVolumeClaim{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(timeout).Should(BeTrue(), "the claim goes with its JobSet once no Pod uses it")
	})
})
