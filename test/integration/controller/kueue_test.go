package controller

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/docpage"
	"github.com/inplace-dev/inplace/test/framework"
	"github.com/inplace-dev/inplace/test/images"
	kueueinstall "github.com/inplace-dev/inplace/test/kueue"
	"github.com/inplace-dev/inplace/test/util"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// The commands of docs/how-to/kueue.md, run as written in the JobSet's
// namespace (kueueNamespace with the spec's namespace for team-a).
const (
	kueueCRD            = `kubectl get crd jobsets.jobset.x-k8s.io -o jsonpath='{.metadata.labels.inplace\.dev/crd-owner}'`
	kueueNamespace      = "kubectl config set-context --current --namespace=team-a"
	kueueQueuesApply    = "kubectl apply -f queues.yaml"
	kueueServiceAccount = "kubectl create serviceaccount train"
	kueueApply          = "kubectl apply -f train.yaml"
	kueueCounts         = "kubectl get jobset train -o custom-columns=SUSPENDED:.spec.suspend,RESTARTS:.status.restarts,EPOCH:.status.syncedEpoch"
	kueueConditions     = `kubectl get jobset train -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}'`
	kueuePods           = `kubectl get pods -l jobset.sigs.k8s.io/jobset-name=train -o jsonpath='{range .items[*]}{.metadata.labels.batch\.kubernetes\.io/job-name} {.spec.nodeSelector}{"\n"}{end}'`
)

// kueueVersion is the Kueue release docs/how-to/kueue.md is checked
// against, the one test/e2e/kueue runs: its CRDs hold the queues of step
// 3, and its default configuration the integration of step 2.
const kueueVersion = images.KueueVersion

// docCheck is a command of docs/how-to/kueue.md and the lines the page
// shows it printing at one point of the JobSet's life; with only, the
// command prints those lines and nothing else.
type docCheck struct {
	command string
	prints  []string
	only    bool
}

// What the commands print: before the JobSet is queued, once it is queued,
// while it is preempted, once it is admitted again to the other flavor,
// and once it is admitted again after a preemption that ended an in-place
// restart.
var (
	kueueInstalled = []docCheck{
		{command: kueueCRD, prints: []string{"inplace"}},
	}
	kueueQueues = []docCheck{
		{command: kueueQueuesApply, only: true, prints: []string{
			"resourceflavor.kueue.x-k8s.io/on-demand created",
			"resourceflavor.kueue.x-k8s.io/spot created",
			"clusterqueue.kueue.x-k8s.io/cluster-queue created",
			"localqueue.kueue.x-k8s.io/user-queue created",
		}},
	}
	kueueSetup = []docCheck{
		{command: kueueServiceAccount, prints: []string{"serviceaccount/train created"}},
	}
	kueueQueued = []docCheck{
		{command: kueueApply, prints: []string{"jobset.jobset.x-k8s.io/train created"}},
	}
	kueuePreempted = []docCheck{
		{command: kueueCounts, prints: []string{"SUSPENDED   RESTARTS   EPOCH", "true        0          1"}},
		{command: kueueConditions, prints: []string{"Suspended=True SuspendedJobs"}},
	}
	kueueReadmitted = []docCheck{
		{command: kueueCounts, prints: []string{"SUSPENDED   RESTARTS   EPOCH", "false       0          2"}},
		{command: kueueConditions, prints: []string{"Suspended=False ResumeJobs"}},
		{command: kueuePods, prints: []string{
			`train-workers-0 {"instance-type":"spot"}`,
			`train-workers-1 {"instance-type":"spot"}`,
		}},
	}
	kueueRestartPreempted = []docCheck{
		{command: kueueCounts, prints: []string{"SUSPENDED   RESTARTS   EPOCH", "false       1          3"}},
		{command: kueueConditions, prints: []string{"Suspended=False ResumeJobs", "RestartingJobSet=False InPlaceRestartSuspended"}},
	}
)

// kueuePage is docs/how-to/kueue.md.
func kueuePage() string {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	page, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "kueue.md"))
	Expect(err).NotTo(HaveOccurred())
	return string(page)
}

// pageYAML is the one YAML code block of docs/how-to/kueue.md that holds
// the line want, without the indentation of its list item.
func pageYAML(want string) string {
	GinkgoHelper()
	page, err := docpage.Read(kueuePage())
	Expect(err).NotTo(HaveOccurred(), "docs/how-to/kueue.md")
	var found []string
	for _, b := range page.Blocks {
		if b.Info == "yaml" && strings.Contains("\n"+b.Text, "\n"+want+"\n") {
			found = append(found, b.Text)
		}
	}
	Expect(found).To(HaveLen(1), "docs/how-to/kueue.md shows one YAML block with %q", want)
	return found[0]
}

// pageJobSet is the JobSet docs/how-to/kueue.md has the reader write
// (train.yaml), in namespace ns.
func pageJobSet(ns string) *jobset.JobSet {
	GinkgoHelper()
	var js jobset.JobSet
	Expect(yaml.UnmarshalStrict([]byte(pageYAML("kind: JobSet")), &js)).To(Succeed())
	js.Namespace = ns
	return &js
}

// pageQueues is the queues.yaml of docs/how-to/kueue.md, as the page shows
// it, with ns for its namespace team-a.
func pageQueues(ns string) string {
	GinkgoHelper()
	queues := pageYAML("kind: LocalQueue")
	Expect(queues).To(ContainSubstring("  namespace: team-a\n"))
	return strings.ReplaceAll(queues, "  namespace: team-a\n", "  namespace: "+ns+"\n")
}

// kueueModule is the directory of Kueue's Go module, at the version
// hack/kueue pins and the end-to-end suite runs.
func kueueModule() string {
	GinkgoHelper()
	root, err := cluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir, err := kueueinstall.Module.Dir(ctx, root)
	Expect(err).NotTo(HaveOccurred())
	Expect(dir).To(BeADirectory())
	return dir
}

// installKueueCRDs installs the CRDs of Kueue's release kueueVersion, as
// its Go module holds them. They stay for the rest of the suite: no other
// spec reads Kueue's kinds, and removing them would wait on the API
// server's cleanup of every queue, which takes long on a loaded machine.
func installKueueCRDs() {
	GinkgoHelper()
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(kueueModule(), "config", "components", "crd", "bases")},
		ErrorIfPathMissing: true,
	})
	Expect(err).NotTo(HaveOccurred(), "installing Kueue %s's CRDs", kueueVersion)
	Expect(crds).To(ContainElements(
		HaveField("Name", "resourceflavors.kueue.x-k8s.io"),
		HaveField("Name", "clusterqueues.kueue.x-k8s.io"),
		HaveField("Name", "localqueues.kueue.x-k8s.io"),
	))
}

// kueueObject reads a Kueue object of kind, version v1beta2.
func kueueObject(kind, ns, name string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: kind})
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed(), "%s %s", kind, name)
	return u
}

// kueueDoc runs the checks in dir, in the namespace that kubeconfig's
// context names, and checks that each command prints what the page shows.
func kueueDoc(kubeconfig, dir string, checks []docCheck) {
	GinkgoHelper()
	for _, c := range checks {
		out := kueueShell(kubeconfig, dir, c.command)
		if c.only {
			Expect(strings.Split(strings.TrimSuffix(out, "\n"), "\n")).To(Equal(c.prints), "%q prints what docs/how-to/kueue.md shows, and nothing else", c.command)
		}
		for _, line := range c.prints {
			Expect(out).To(ContainSubstring(line), "%q prints what docs/how-to/kueue.md shows", c.command)
		}
	}
}

// kueueShell runs a command line of docs/how-to/kueue.md in dir as a
// person would in a shell, with bin/kubectl first on the PATH and
// kubeconfig as KUBECONFIG, and returns what it printed.
func kueueShell(kubeconfig, dir, line string) string {
	GinkgoHelper()
	bin, err := cluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+GinkgoT().TempDir())
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("$ %s\n%s", line, out)
	Expect(err).NotTo(HaveOccurred(), "%s:\n%s", line, out)
	return string(out)
}

var _ = It("Kueue's default configuration enables the JobSet integration docs/how-to/kueue.md shows", func() {
	var page, defaults struct {
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
	}
	Expect(yaml.Unmarshal([]byte(pageYAML("integrations:")), &page)).To(Succeed())
	Expect(page.Integrations.Frameworks).To(Equal([]string{"jobset.x-k8s.io/jobset"}))
	config, err := os.ReadFile(filepath.Join(kueueModule(), "config", "components", "manager", "controller_manager_config.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.Unmarshal(config, &defaults)).To(Succeed())
	Expect(defaults.Integrations.Frameworks).To(ContainElements(page.Integrations.Frameworks), "Kueue %s's default configuration", kueueVersion)
})

var _ = It("docs/how-to/kueue.md shows the commands the Kueue spec runs, and what they print", func() {
	page := kueuePage()
	Expect(page).To(ContainSubstring(kueueNamespace))
	Expect(strings.Join(strings.Fields(page), " ")).To(ContainSubstring("checked against Kueue "+kueueVersion+"."), "docs/how-to/kueue.md names the Kueue release it is checked against")
	for _, checks := range [][]docCheck{kueueInstalled, kueueQueues, kueueSetup, kueueQueued, kueuePreempted, kueueReadmitted, kueueRestartPreempted} {
		for _, c := range checks {
			Expect(page).To(ContainSubstring(c.command), "docs/how-to/kueue.md shows the command")
			for _, line := range c.prints {
				Expect(page).To(ContainSubstring(line), "docs/how-to/kueue.md shows what %q prints", c.command)
			}
		}
	}
})

// These specs play Kueue's side of its JobSet integration, as Kueue
// documents it; they do not run Kueue: its webhook creates the JobSet
// suspended; admission writes each Pod set's node selectors, tolerations,
// labels and scheduling gates of the flavor it chose into the Pod
// templates and unsuspends, in one update; preemption suspends and
// restores the templates, in one update; the workload is later admitted
// again, elsewhere. The JobSet, its queue and its flavors are those of
// docs/how-to/kueue.md; the first spec creates the queues and flavors on
// Kueue's own CRDs, with no controller of Kueue's behind them.
var _ = Describe("a JobSet queued by Kueue", func() {
	const queueLabel = "kueue.x-k8s.io/queue-name"
	// flavorLabel is the node label of the page's ResourceFlavors.
	const flavorLabel = "instance-type"
	var ns *corev1.Namespace
	BeforeEach(func() {
		ns = fw.NewNamespace(ctx, k8sClient)
		util.WaitForDefaultServiceAccount(ctx, k8sClient, ns.Name)
		// The nodes of the page's two ResourceFlavors. The Nodes are the
		// suite's: each gets its label back as it was when the spec ends.
		for node, flavor := range map[string]string{"node-0": "on-demand", "node-1": "spot"} {
			setLabel := func(ctx context.Context, value string, set bool) {
				GinkgoHelper()
				var n corev1.Node
				Expect(k8sClient.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
				patch := client.MergeFrom(n.DeepCopy())
				if set {
					if n.Labels == nil {
						n.Labels = map[string]string{}
					}
					n.Labels[flavorLabel] = value
				} else {
					delete(n.Labels, flavorLabel)
				}
				Expect(k8sClient.Patch(ctx, &n, patch)).To(Succeed(), "node %s", node)
			}
			var n corev1.Node
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
			old, had := n.Labels[flavorLabel]
			setLabel(ctx, flavor, true)
			DeferCleanup(func(ctx SpecContext) { setLabel(ctx, old, had) })
		}
	})

	// flavor is what Kueue writes into every Pod template when it admits.
	type flavor struct {
		nodeSelector map[string]string
		tolerations  []corev1.Toleration
		labels       map[string]string
		gates        []corev1.PodSchedulingGate
	}
	// The page's ResourceFlavors on-demand and spot.
	flavorA := flavor{
		nodeSelector: map[string]string{"instance-type": "on-demand"},
		tolerations:  []corev1.Toleration{{Key: "instance-type", Operator: corev1.TolerationOpEqual, Value: "on-demand", Effect: corev1.TaintEffectNoSchedule}},
		labels:       map[string]string{"kueue.x-k8s.io/podset": "workers", "flavor": "on-demand"},
	}
	flavorB := flavor{
		nodeSelector: map[string]string{"instance-type": "spot"},
		tolerations:  []corev1.Toleration{{Key: "instance-type", Operator: corev1.TolerationOpEqual, Value: "spot", Effect: corev1.TaintEffectNoSchedule}},
		labels:       map[string]string{"kueue.x-k8s.io/podset": "workers", "flavor": "spot"},
	}

	// update changes the JobSet as Kueue does: read, change, write, again
	// on a conflict.
	update := func(js *jobset.JobSet, change func(*jobset.JobSet)) {
		GinkgoHelper()
		util.UpdateJobSet(ctx, k8sClient, js, change)
	}
	admit := func(js *jobset.JobSet, f flavor) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			for i := range js.Spec.ReplicatedJobs {
				tpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
				tpl.Spec.NodeSelector = f.nodeSelector
				tpl.Spec.Tolerations = append(tpl.Spec.Tolerations, f.tolerations...)
				tpl.Spec.SchedulingGates = f.gates
				if tpl.Labels == nil {
					tpl.Labels = map[string]string{}
				}
				for k, v := range f.labels {
					tpl.Labels[k] = v
				}
			}
			js.Spec.Suspend = ptr.To(false)
		})
	}
	preempt := func(js *jobset.JobSet, f flavor) {
		GinkgoHelper()
		update(js, func(js *jobset.JobSet) {
			js.Spec.Suspend = ptr.To(true)
			for i := range js.Spec.ReplicatedJobs {
				tpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
				tpl.Spec.NodeSelector = nil
				tpl.Spec.Tolerations = slicesWithout(tpl.Spec.Tolerations, f.tolerations)
				tpl.Spec.SchedulingGates = nil
				for k := range f.labels {
					delete(tpl.Labels, k)
				}
			}
		})
	}
	// expectPodsOf waits for want Pods not being deleted, every one started
	// with the flavor's directives, and returns them.
	expectPodsOf := func(js *jobset.JobSet, want int, f flavor) []corev1.Pod {
		GinkgoHelper()
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			pods = livePods(g, js)
			g.Expect(pods).To(HaveLen(want))
			for _, p := range pods {
				g.Expect(p.Spec.NodeSelector).To(Equal(f.nodeSelector), "pod %s", p.Name)
				g.Expect(p.Spec.Tolerations).To(ContainElements(f.tolerations), "pod %s", p.Name)
				g.Expect(p.Spec.SchedulingGates).To(Equal(f.gates), "pod %s", p.Name)
				for k, v := range f.labels {
					g.Expect(p.Labels).To(HaveKeyWithValue(k, v), "pod %s", p.Name)
				}
			}
		}).WithTimeout(timeout).Should(Succeed())
		return pods
	}
	run := func(js *jobset.JobSet, pods []corev1.Pod, epoch string) {
		GinkgoHelper()
		for _, job := range []string{"train-workers-0", "train-workers-1"} {
			util.SetPodsRunning(ctx, k8sClient, js.Namespace, job, 2)
		}
		for i := range pods {
			util.SetEpoch(ctx, k8sClient, &pods[i], epoch)
		}
	}
	expectStatus := func(js *jobset.JobSet, synced, restarts int32) *jobset.JobSet {
		GinkgoHelper()
		var got *jobset.JobSet
		Eventually(func(g Gomega) {
			got = get(js)
			g.Expect(got.Status.SyncedEpoch).To(Equal(synced), "syncedEpoch")
			g.Expect(got.Status.Restarts).To(Equal(restarts), "restarts")
			g.Expect(got.Status.RestartsCountTowardsMax).To(Equal(restarts), "restartsCountTowardsMax")
			g.Expect(got.Status.TerminalState).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		return got
	}

	It("is admitted, preempted and admitted elsewhere without a restart counted, and still restarts in place after", func() {
		By("the page's JobSet, created by the page's commands in its namespace")
		kubeconfig, dir := framework.WriteKubeconfig(cfg), GinkgoT().TempDir()
		Expect(kueueShell(kubeconfig, dir, strings.Replace(kueueNamespace, "team-a", ns.Name, 1))).To(ContainSubstring("modified"))
		kueueDoc(kubeconfig, dir, kueueInstalled)
		js := pageJobSet(ns.Name)
		Expect(js.Labels).To(HaveKeyWithValue(queueLabel, "user-queue"))

		By("the page's queues, created by the page's command, on Kueue's CRDs")
		installKueueCRDs()
		Expect(os.WriteFile(filepath.Join(dir, "queues.yaml"), []byte(pageQueues(ns.Name)), 0o600)).To(Succeed())
		kueueDoc(kubeconfig, dir, kueueQueues)
		// The JobSet's label names the LocalQueue of its namespace, and the
		// flavors this spec admits to are the page's ResourceFlavors.
		Expect(kueueObject("LocalQueue", ns.Name, js.Labels[queueLabel]).Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("clusterQueue", "cluster-queue")))
		for name, f := range map[string]flavor{"on-demand": flavorA, "spot": flavorB} {
			spec, err := json.Marshal(kueueObject("ResourceFlavor", "", name).Object["spec"])
			Expect(err).NotTo(HaveOccurred())
			var rf struct {
				NodeLabels  map[string]string   `json:"nodeLabels"`
				Tolerations []corev1.Toleration `json:"tolerations"`
			}
			Expect(json.Unmarshal(spec, &rf)).To(Succeed())
			Expect(rf.NodeLabels).To(Equal(f.nodeSelector), "ResourceFlavor %s", name)
			Expect(rf.Tolerations).To(Equal(f.tolerations), "ResourceFlavor %s", name)
		}
		kueueDoc(kubeconfig, dir, kueueSetup)
		// What Kueue's webhook does to it: suspended until admitted. A
		// budget of one restart: the preemption after it must not fail
		// the JobSet.
		js.Spec.Suspend = ptr.To(true)
		js.Spec.FailurePolicy.MaxRestarts = 1
		manifest, err := yaml.Marshal(js)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "train.yaml"), manifest, 0o600)).To(Succeed())
		kueueDoc(kubeconfig, dir, kueueQueued)
		expectJobs(js, "0", "train-workers-0", "train-workers-1")
		jobUIDs := uids(js)
		Consistently(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(shortWait).Should(Succeed(), "a queued JobSet runs no Pod")

		By("admission to flavor a: the Pods start with its directives and sync")
		admit(js, flavorA)
		pods := expectPodsOf(js, 4, flavorA)
		run(js, pods, "1")
		expectStatus(js, 1, 0)

		By("preemption: every Pod stops, no restart is counted, nothing fails")
		preempt(js, flavorA)
		expectCondition(js, jobset.JobSetSuspended, "True", "SuspendedJobs")
		Eventually(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(timeout).Should(Succeed())
		got := expectStatus(js, 1, 0)
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(1)), "the preempted group's epoch is over")
		Expect(findCondition(got, jobset.JobSetRestarting)).To(BeNil())
		kueueDoc(kubeconfig, dir, kueuePreempted)

		By("admission to flavor b: the Pods start with b's directives, a's are gone, and a fresh epoch syncs")
		admit(js, flavorB)
		pods = expectPodsOf(js, 4, flavorB)
		for _, p := range pods {
			Expect(p.Spec.Tolerations).NotTo(ContainElements(flavorA.tolerations), "pod %s", p.Name)
		}
		run(js, pods, "2")
		expectStatus(js, 2, 0)
		Expect(uids(js)).To(Equal(jobUIDs), "a preemption recreated a Job")
		allPods(js, 4) // the preempted ones gone
		kueueDoc(kubeconfig, dir, kueueReadmitted)

		By("a worker exits: every Pod restarts in place, one restart counted")
		podUIDs := map[types.UID]bool{}
		for _, p := range pods {
			podUIDs[p.UID] = true
		}
		util.ExitContainer(ctx, k8sClient, &pods[0], "worker", 1)
		got = expectCondition(js, jobset.JobSetRestarting, "True", "InPlaceRestart")
		Expect(got.Status.Restarts).To(Equal(int32(1)))
		Expect(got.Status.InPlaceRestarts).To(Equal(int32(1)))
		Expect(got.Status.DeprecatedEpoch).To(Equal(int32(2)))

		By("a preemption during the in-place restart ends it, without another restart")
		preempt(js, flavorB)
		expectCondition(js, jobset.JobSetRestarting, "False", "InPlaceRestartSuspended")
		Eventually(func(g Gomega) { g.Expect(livePods(g, js)).To(BeEmpty()) }).WithTimeout(timeout).Should(Succeed())
		expectStatus(js, 2, 1)

		By("admitted again: a fresh epoch syncs; maxRestarts 1 is used, and the JobSet still runs")
		admit(js, flavorA)
		pods = expectPodsOf(js, 4, flavorA)
		run(js, pods, "3")
		expectStatus(js, 3, 1)
		for _, p := range pods {
			Expect(podUIDs).NotTo(HaveKey(p.UID), "pod %s survived a preemption", p.Name)
		}
		kueueDoc(kubeconfig, dir, kueueRestartPreempted)
	})

	// Upstream JobSet's end-to-end case "JobSet is resumed — propagates
	// scheduling gates to Pods": Kueue's topology-aware scheduling adds a
	// gate in the update that resumes.
	It("starts its Pods with the scheduling gates added in the update that resumes it", func() {
		js := create(wrappers.MakeJobSet("train", ns.Name).Label(queueLabel, "user-queue").Suspend(true).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(2).Parallelism(2).Obj()).Obj())
		expectJobs(js, "0", "train-workers-0", "train-workers-1")
		gated := flavorA
		gated.gates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
		admit(js, gated)
		pods := expectPodsOf(js, 4, gated)
		Consistently(func(g Gomega) {
			for _, p := range livePods(g, js) {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "pod %s was scheduled through its gate", p.Name)
			}
		}).WithTimeout(shortWait).Should(Succeed())
		Expect(pods).To(HaveLen(4))
		for _, name := range []string{"train-workers-0", "train-workers-1"} {
			var job batchv1.Job
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, &job)).To(Succeed())
			Expect(job.Spec.Template.Spec.SchedulingGates).To(Equal(gated.gates), "job %s", name)
		}
	})
})

// shortWait is how long a spec watches for something that must not happen.
const shortWait = 2 * time.Second

// livePods returns the JobSet's Pods not being deleted.
func livePods(g Gomega, js *jobset.JobSet) []corev1.Pod {
	var list corev1.PodList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingLabels{jobset.JobSetNameKey: js.Name})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// slicesWithout returns ts without the tolerations in drop.
func slicesWithout(ts, drop []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		keep := true
		for _, d := range drop {
			if t.MatchToleration(&d) {
				keep = false
			}
		}
		if keep {
			out = append(out, t)
		}
	}
	return out
}
