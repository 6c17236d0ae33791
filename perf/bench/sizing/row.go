package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/inplace-dev/inplace/api/config/v1alpha1"
	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	managerapp "github.com/inplace-dev/inplace/cmd/manager/app"
	"github.com/inplace-dev/inplace/test/cluster"
	"github.com/inplace-dev/inplace/test/deploy"
	"github.com/inplace-dev/inplace/test/simnode"
	"github.com/inplace-dev/inplace/test/wrappers"
)

// result is one row measured. CPU is in CPU-seconds of the process, by
// phase: for the controller, from the first JobSet's creation until every
// group synced (start) and one in-place restart of every JobSet (restart);
// for the admission server, the JobSets' admission and one audit period
// (the mean of three, idle time included; an audit reads no JobSet
// without a policy).
type result struct {
	size
	Controller struct {
		usage
		Start   float64 `json:"startCPUSeconds"`
		Restart float64 `json:"restartCPUSeconds"`
	} `json:"controller"`
	Webhook struct {
		usage
		Admission float64 `json:"admissionCPUSeconds"`
		Audit     float64 `json:"auditCPUSeconds"`
	} `json:"webhook"`
	// AuditSeconds is how long the last audit took, as the admission
	// server reports it.
	AuditSeconds float64 `json:"auditSeconds"`
}

// auditInterval is the admission server's audit period in the benchmark:
// three audits are timed after the restarts.
const auditInterval = 10 * time.Second

// podsPerNode is how many Pods the benchmark puts on each simulated node
// (each takes 110).
const podsPerNode = 100

// guardRego is a typical admin policy with a parameter: a restart budget,
// which no JobSet of the benchmark exceeds.
const guardRego = `package guardrails.p%d

deny contains msg if {
	input.object.spec.failurePolicy.maxRestarts > input.parameters.limit
	msg := sprintf("spec.failurePolicy.maxRestarts is %%d, above this cluster's limit of %%d: lower it", [input.object.spec.failurePolicy.maxRestarts, input.parameters.limit])
}
`

func measure(ctx context.Context, bin, dir string, s size, timeout time.Duration, progress io.Writer) (result, error) {
	r := result{size: s}
	log := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	c, err := cluster.Start(ctx, cluster.Options{Name: "bench-sizing"})
	if err != nil {
		return r, err
	}
	defer func() { _ = c.Stop(false) }()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := deploy.InstallCRDs(c.Config); err != nil {
		return r, err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: managerapp.NewScheme()})
	if err != nil {
		return r, err
	}

	// The two Deployments of config/default, each its own process, with
	// the self-signed certificate of config/selfsigned.
	ports, err := cluster.FreePorts(1)
	if err != nil {
		return r, err
	}
	rowDir := filepath.Join(dir, fmt.Sprintf("%dx%dx%d", s.JobSets, s.Pods, s.Policies))
	if err := os.MkdirAll(rowDir, 0o755); err != nil {
		return r, err
	}
	conf, err := configv1alpha1.Load("")
	if err != nil {
		return r, err
	}
	conf.Webhook.Port, conf.Webhook.CertDir = ports[0], filepath.Join(rowDir, "certs")
	conf.Webhook.SelfSignedCerts, conf.Webhook.Hosts = true, []string{"127.0.0.1", "localhost"}
	conf.Policies.AuditInterval = &metav1.Duration{Duration: auditInterval}
	procs := map[string]*manager{}
	for _, role := range []string{managerapp.RoleController, managerapp.RoleWebhook} {
		cfg, err := deploy.ManagerConfig(ctx, c.Config, deploy.ServiceAccount(role), 24*time.Hour)
		if err != nil {
			return r, err
		}
		m, err := startManager(runCtx, bin, rowDir, role, cfg, conf)
		if err != nil {
			return r, err
		}
		defer m.stop()
		procs[role] = m
	}
	ctrl, webhook := procs[managerapp.RoleController], procs[managerapp.RoleWebhook]
	if err := deploy.RegisterAdmission(ctx, cl, ports[0]); err != nil {
		return r, err
	}
	if err := deploy.WaitForWebhooks(ctx, cl, 2*time.Minute); err != nil {
		return r, fmt.Errorf("the admission server did not serve (its log: %s): %w", filepath.Join(rowDir, "webhook.log"), err)
	}
	nodes := (s.JobSets*s.Pods + podsPerNode - 1) / podsPerNode
	if _, err := simnode.Start(runCtx, simnode.Options{
		Client: kubernetes.NewForConfigOrDie(c.Config), Nodes: nodes, Prefix: "sim",
		AgentContainer: "inplace-agent", AgentConfig: c.Config, Log: logr.Discard(),
	}); err != nil {
		return r, err
	}
	if err := createPolicies(ctx, cl, s.Policies, webhook, timeout); err != nil {
		return r, err
	}
	log("%d simulated nodes, %d policies ready", nodes, s.Policies)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sizing"}}
	if err := cl.Create(ctx, ns); err != nil {
		return r, err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return cl.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	}); err != nil {
		return r, err
	}
	ctrl0, err := ctrl.usage()
	if err != nil {
		return r, err
	}
	wh0, err := webhook.usage()
	if err != nil {
		return r, err
	}
	if err := createJobSets(ctx, cl, ns.Name, s); err != nil {
		return r, err
	}
	wh1, err := webhook.usage()
	if err != nil {
		return r, err
	}
	r.Webhook.Admission = wh1.CPUSeconds - wh0.CPUSeconds
	if err := synced(ctx, cl, ns.Name, s, 1, ctrl, timeout); err != nil {
		return r, fmt.Errorf("starting: %w", err)
	}
	ctrl1, err := ctrl.usage()
	if err != nil {
		return r, err
	}
	r.Controller.Start = ctrl1.CPUSeconds - ctrl0.CPUSeconds
	log("%d JobSets admitted and synced", s.JobSets)

	// One worker of every JobSet exits: every group restarts in place.
	if err := failOneWorkerEach(ctx, cl, ns.Name); err != nil {
		return r, err
	}
	if err := synced(ctx, cl, ns.Name, s, 2, ctrl, timeout); err != nil {
		return r, fmt.Errorf("restarting: %w", err)
	}
	ctrl2, err := ctrl.usage()
	if err != nil {
		return r, err
	}
	r.Controller.Restart = ctrl2.CPUSeconds - ctrl1.CPUSeconds
	log("every JobSet restarted in place")

	// The audit: once it has seen every JobSet, three more periods.
	// Without a policy it reads no JobSet.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := webhook.alive(); err != nil {
			return false, err
		}
		n, ok, err := webhook.gauge(ctx, "inplace_policy_audit_jobsets")
		return s.Policies == 0 || err == nil && ok && int(n) == s.JobSets, nil
	}); err != nil {
		return r, fmt.Errorf("no audit saw the %d JobSets: %w", s.JobSets, err)
	}
	wh2, err := webhook.usage()
	if err != nil {
		return r, err
	}
	select {
	case <-time.After(3 * auditInterval):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	wh3, err := webhook.usage()
	if err != nil {
		return r, err
	}
	r.Webhook.Audit = (wh3.CPUSeconds - wh2.CPUSeconds) / 3
	if r.AuditSeconds, _, err = webhook.gauge(ctx, "inplace_policy_audit_duration_seconds"); err != nil {
		return r, err
	}
	if r.Controller.usage, err = ctrl.usage(); err != nil {
		return r, err
	}
	r.Webhook.usage = wh3
	return r, nil
}

// createPolicies creates n admin policies that every JobSet matches and
// none violates, and waits until each is Ready.
func createPolicies(ctx context.Context, cl client.Client, n int, webhook *manager, timeout time.Duration) error {
	for i := range n {
		p := &policyv1alpha1.JobSetPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guard-%04d", i)},
			Spec: policyv1alpha1.JobSetPolicySpec{
				EnforcementAction: policyv1alpha1.Deny,
				Rego:              fmt.Sprintf(guardRego, i),
				Parameters:        &apiextensionsv1.JSON{Raw: []byte(`{"limit": 1000}`)},
			},
		}
		if err := cl.Create(ctx, p); err != nil {
			return fmt.Errorf("creating policy %s: %w", p.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := webhook.alive(); err != nil {
			return false, err
		}
		var list policyv1alpha1.JobSetPolicyList
		if err := cl.List(ctx, &list); err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if !meta.IsStatusConditionTrue(p.Status.Conditions, policyv1alpha1.ConditionReady) {
				return false, nil
			}
		}
		return len(list.Items) == n, nil
	})
}

// createJobSets creates the row's JobSets, ten at a time, as a client
// would: each through both webhooks.
func createJobSets(ctx context.Context, cl client.Client, ns string, s size) error {
	var (
		mu    sync.Mutex
		first error
		next  = make(chan int)
		wg    sync.WaitGroup
	)
	for range 10 {
		wg.Go(func() {
			for i := range next {
				rj := wrappers.MakeReplicatedJob("workers").Replicas(int32(s.Pods)).Obj()
				rj.Template.Spec.BackoffLimit = nil
				js := wrappers.MakeJobSet(fmt.Sprintf("train-%04d", i), ns).ReplicatedJob(rj).
					FailurePolicy(&jobset.FailurePolicy{RestartStrategy: jobset.InPlaceRestart, MaxRestarts: 10}).Obj()
				if err := cl.Create(ctx, js); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("creating JobSet %s: %w", js.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range s.JobSets {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// synced waits until every JobSet's group synced at epoch or later, with
// every Job ready, while the controller runs.
func synced(ctx context.Context, cl client.Client, ns string, s size, epoch int32, controller *manager, timeout time.Duration) error {
	var missing string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := controller.alive(); err != nil {
			return false, err
		}
		var list jobset.JobSetList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		done := 0
		for _, js := range list.Items {
			ready := int32(0)
			for _, rj := range js.Status.ReplicatedJobsStatus {
				ready += rj.Ready
			}
			if js.Status.SyncedEpoch >= epoch && js.Status.SyncedEpoch > js.Status.DeprecatedEpoch && ready == int32(s.Pods) {
				done++
			}
		}
		missing = fmt.Sprintf("%d of %d JobSets synced at epoch %d with every Job ready", done, s.JobSets, epoch)
		return done == s.JobSets, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, missing)
	}
	return nil
}

// failOneWorkerEach makes the worker of one Pod of every JobSet exit with
// code 1 (the simulated node's exit annotation).
func failOneWorkerEach(ctx context.Context, cl client.Client, ns string) error {
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobset.JobIndexKey: "0"}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		patch := client.MergeFrom(p.DeepCopy())
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, simnode.ExitCodeAnnotation, "1")
		if err := cl.Patch(ctx, p, patch); err != nil {
			return err
		}
	}
	return nil
}
