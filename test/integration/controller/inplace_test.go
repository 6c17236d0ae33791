package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// These specs play the agents by writing the Pods' epoch annotations and
// the kubelet by writing container states, and check the controller's side
// of the epoch protocol through the real API server.
var _ = Describe("the epoch protocol of InPlaceRestart", func() {
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
	})

	expectEpochs := func(js *jobset.JobSet, deprecated, synced int32) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			got := get(js)
			g.Expect(got.Status.DeprecatedEpoch).To(Equal(deprecated), "deprecatedEpoch")
			g.Expect(got.Status.SyncedEpoch).To(Equal(synced), "syncedEpoch")
			var cm corev1.ConfigMap
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: protocol.BroadcastName(js.Name)}, &cm)).To(Succeed())
			b, err := protocol.DecodeBroadcast(cm.Data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.DeprecatedEpoch).To(Equal(deprecated), "broadcast deprecatedEpoch")
			g.Expect(b.SyncedEpoch).To(Equal(synced), "broadcast syncedEpoch")
		}).WithTimeout(timeout).Should(Succeed())
	}

	// syncAll plays every agent reporting epoch 1, and waits for the sync.
	syncAll := func(js *jobset.JobSet, want int) []corev1.Pod {
		GinkgoHelper()
		pods := reportEpoch(js, want, "1")
		expectEpochs(js, 0, 1)
		return pods
	}

	It("leaves a ConfigMap of the broadcast's name that is not the JobSet's alone, and says so", func() {
		theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName("taken"), Namespace: ns.Name},
			Data: map[string]string{"owner": "someone else"}}
		Expect(k8sClient.Create(ctx, theirs)).To(Succeed())
		rj := wrappers.MakeReplicatedJob("w").Replicas(1).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil
		js := create(wrappers.MakeJobSet("taken", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		expectJobs(js, "0", "taken-w-0")
		reportEpoch(js, 2, "1")
		expectEvent(js, "BroadcastConfigMapConflict")
		var got corev1.ConfigMap
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), &got)).To(Succeed())
		Expect(got.Data).To(Equal(map[string]string{"owner": "someone else"}), "the controller wrote a ConfigMap that is not its JobSet's")
		Expect(got.OwnerReferences).To(BeEmpty())
	})

	It("syncs, deprecates the moment a worker exits, counts exactly maxRestarts and never recreates a Job", func() {
		rj := wrappers.MakeReplicatedJob("w").Replicas(2).Parallelism(2).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(wrappers.MakeJobSet("ip", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 1}).Obj())
		expectJobs(js, "0", "ip-w-0", "ip-w-1")
		jobUIDs := uids(js)
		pods := syncAll(js, 4)

		util.ExitContainer(ctx, k8sClient, &pods[2], "worker", 1)
		expectEpochs(js, 1, 1)
		got := expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestart")
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Expect(got.Status.RestartsCountTowardsMax).To(Equal(int32(1)))
		Expect(findCondition(got, jobset.JobSetRestarting).Message).To(ContainSubstring("container worker of Pod " + pods[2].Name + " exited"))
		expectEvent(js, "InPlaceRestart")

		// Every agent restarted and reported the next epoch.
		for i := range pods {
			util.SetPodsRunning(ctx, k8sClient, ns.Name, pods[i].Labels["batch.kubernetes.io/job-name"], 2)
			util.SetEpoch(ctx, k8sClient, &pods[i], "2")
		}
		expectEpochs(js, 1, 2)
		expectCondition(js, jobset.JobSetRestarting, "False", "InPlaceRestartCompleted")
		Expect(uids(js)).To(Equal(jobUIDs), "an in-place restart recreated a Job")

		// The one allowed restart is used: the next exit fails the JobSet.
		util.ExitContainer(ctx, k8sClient, &pods[0], "worker", 1)
		got = expectCondition(js, jobset.JobSetFailed, "True", "ReachedMaxRestarts")
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
	})

	It("writes a RestartJob decided while an in-place restart is under way, recreates the Job, and records its Event once", func() {
		rj := wrappers.MakeReplicatedJob("w").Replicas(2).PodFailurePolicy(&batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{5}},
		}}}).Obj()
		rj.Template.Spec.BackoffLimit = nil // set by the webhook for InPlaceRestart
		js := create(wrappers.MakeJobSet("rj", ns.Name).ReplicatedJob(rj).
			FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 3, Rules: []jobset.FailurePolicyRule{
				{Name: "job", Action: jobset.RestartJob, OnJobFailureReasons: []string{batchv1.JobReasonPodFailurePolicy}},
			}}).Obj())
		expectJobs(js, "0", "rj-w-0", "rj-w-1")
		before := uids(js)
		pods := syncAll(js, 2)

		// An in-place restart begins, and before it ends the other Job
		// fails for good (its Pod's exit code fails it).
		byJob := map[string]*corev1.Pod{}
		for i := range pods {
			byJob[pods[i].Labels[batchv1.JobNameLabel]] = &pods[i]
		}
		util.ExitContainer(ctx, k8sClient, byJob["rj-w-0"], "worker", 1)
		expectEpochs(js, 1, 1)
		util.FinishPod(ctx, k8sClient, byJob["rj-w-1"], 5)

		Eventually(func(g Gomega) {
			now := jobs(g, js)
			g.Expect(now["rj-w-1"].UID).NotTo(BeEmpty())
			g.Expect(now["rj-w-1"].UID).NotTo(Equal(before["rj-w-1"]), "the failed Job is recreated")
			g.Expect(now["rj-w-1"].Labels).To(HaveKeyWithValue("jobset.sigs.k8s.io/job-restart-attempt", "1"))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(uids(js)["rj-w-0"]).To(Equal(before["rj-w-0"]), "the other Job is untouched")
		Expect(get(js).Status.ReplicatedJobsStatus[0].JobRestarts).To(Equal([]int32{0, 1}))
		// One decision, one Event: not one per reconcile that decided it
		// again on a status not yet written.
		expectEvent(js, "RestartJobFailurePolicyAction")
		var events corev1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
		for _, e := range events.Items {
			if e.Reason == "RestartJobFailurePolicyAction" {
				Expect(e.Series == nil || e.Series.Count <= 1).To(BeTrue(), "the Event was recorded again: %+v", e.Series)
				Expect(e.Count).To(BeNumerically("<=", 1))
			}
		}
	})
})
