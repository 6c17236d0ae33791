package api

import (
	"bytes"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	inplacectl "github.com/inplace-dev/inplace/cmd/inplacectl/app"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/wrappers"
)

var _ = Describe("inplacectl status", func() {
	It("reads a JobSet, its broadcast, Pods and Events from the cluster --kubeconfig names, in -n, as JSON", func() {
		ns := fw.NewNamespace(ctx, k8sClient)
		js := wrappers.MakeJobSet("train", ns.Name).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Obj()).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 3}).Obj()
		Expect(k8sClient.Create(ctx, js)).To(Succeed())
		js.Status.Restarts, js.Status.InPlaceRestarts, js.Status.RestartsCountTowardsMax = 1, 1, 1
		js.Status.DeprecatedEpoch, js.Status.SyncedEpoch = 1, 2
		Expect(k8sClient.Status().Update(ctx, js)).To(Succeed())

		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: protocol.BroadcastName(js.Name)},
			Data:       protocol.EncodeBroadcast(protocol.Broadcast{DeprecatedEpoch: 1, SyncedEpoch: 2, OpenReplicatedJobs: []string{"workers"}}),
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "train-workers-0-0",
				Labels:      map[string]string{jobset.JobSetNameKey: js.Name, jobset.ReplicatedJobNameKey: "workers"},
				Annotations: map[string]string{jobset.EpochKey: "2"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "registry.example/trainer:1"}}},
		})).To(Succeed())
		failed := metav1.NewTime(time.Now().Truncate(time.Second))
		Expect(k8sClient.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "train-"},
			InvolvedObject: corev1.ObjectReference{APIVersion: jobset.GroupVersion.String(), Kind: jobset.Kind,
				Namespace: ns.Name, Name: js.Name, UID: js.UID},
			Reason: "InPlaceRestart", Message: "pod train-workers-0-1 failed", Type: corev1.EventTypeNormal,
			FirstTimestamp: failed, LastTimestamp: failed, Source: corev1.EventSource{Component: "inplace-manager"},
		})).To(Succeed())

		var out, errOut bytes.Buffer
		code := inplacectl.Run(ctx, []string{"status", js.Name, "-n", ns.Name, "--kubeconfig", framework.WriteKubeconfig(cfg), "-o", "json"}, &out, &errOut)
		Expect(code).To(BeZero(), errOut.String())

		var report struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Restarts  int32  `json:"restarts"`
			InPlace   struct {
				SyncedEpoch     int32 `json:"syncedEpoch"`
				DeprecatedEpoch int32 `json:"deprecatedEpoch"`
				Broadcast       struct {
					SyncedEpoch int32 `json:"syncedEpoch"`
				} `json:"broadcast"`
				ReplicatedJobs []struct {
					Name          string `json:"name"`
					Pods          int    `json:"pods"`
					AtSyncedEpoch int    `json:"atSyncedEpoch"`
					Barrier       string `json:"barrier"`
				} `json:"replicatedJobs"`
				Pods []struct {
					Name  string `json:"name"`
					Epoch string `json:"epoch"`
				} `json:"pods"`
				LastRestart []struct {
					At   time.Time `json:"at"`
					What string    `json:"what"`
				} `json:"lastRestart"`
			} `json:"inPlace"`
		}
		Expect(json.Unmarshal(out.Bytes(), &report)).To(Succeed(), out.String())
		Expect(report.Namespace).To(Equal(ns.Name))
		Expect(report.Name).To(Equal(js.Name))
		Expect(report.Restarts).To(Equal(int32(1)))
		Expect(report.InPlace.SyncedEpoch).To(Equal(int32(2)))
		Expect(report.InPlace.DeprecatedEpoch).To(Equal(int32(1)))
		Expect(report.InPlace.Broadcast.SyncedEpoch).To(Equal(int32(2)))
		Expect(report.InPlace.ReplicatedJobs).To(HaveLen(1))
		Expect(report.InPlace.ReplicatedJobs[0].Name).To(Equal("workers"))
		Expect(report.InPlace.ReplicatedJobs[0].Pods).To(Equal(1))
		Expect(report.InPlace.ReplicatedJobs[0].AtSyncedEpoch).To(Equal(1))
		Expect(report.InPlace.ReplicatedJobs[0].Barrier).To(Equal("lifted"))
		Expect(report.InPlace.Pods).To(HaveLen(1))
		Expect(report.InPlace.Pods[0].Name).To(Equal("train-workers-0-0"))
		Expect(report.InPlace.Pods[0].Epoch).To(Equal("2"))
		Expect(report.InPlace.LastRestart).NotTo(BeEmpty())
		Expect(report.InPlace.LastRestart[0].What).To(Equal("failure seen, epoch deprecated: pod train-workers-0-1 failed"))
		Expect(report.InPlace.LastRestart[0].At.Equal(failed.Time)).To(BeTrue(), "the Event's time")

		By("completing a JobSet's name from the cluster")
		out.Reset()
		errOut.Reset()
		code = inplacectl.Run(ctx, []string{"__complete", "status", "--kubeconfig", framework.WriteKubeconfig(cfg), "-n", ns.Name, "tr"}, &out, &errOut)
		Expect(code).To(BeZero(), errOut.String())
		Expect(out.String()).To(Equal("train\n:4\n"), errOut.String())

		By("a JobSet that is not there")
		out.Reset()
		errOut.Reset()
		code = inplacectl.Run(ctx, []string{"status", "absent", "--namespace=" + ns.Name, "--kubeconfig=" + framework.WriteKubeconfig(cfg)}, &out, &errOut)
		Expect(code).To(Equal(1))
		Expect(errOut.String()).To(ContainSubstring("JobSet " + ns.Name + "/absent not found"))
	})
})
