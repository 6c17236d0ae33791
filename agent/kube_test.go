package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
)

// TestAgentOnAPIServer runs the agent with the API server transport against
// a real kube-apiserver: it reports its epoch on its Pod, lifts the barrier
// once the epoch is synced, and exits with the restart code once deprecated.
func TestAgentOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the apiserver: %v", err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const ns = "default"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: ns},
		Spec:       corev1.PodSpec{AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "w", Image: "w"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: protocol.BroadcastName("train"), Namespace: ns},
		Data: protocol.EncodeBroadcast(protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1})}
	if cm, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	done := make(chan int, 1)
	go func() {
		code, err := Run(ctx, testr.New(t), Config{ReplicatedJob: "workers", RestartExitCode: 88, Listen: fmt.Sprintf("127.0.0.1:%d", port)},
			&KubeTransport{Client: cs, Namespace: ns, Pod: "worker-0", JobSet: "train", Log: testr.New(t)})
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()

	// The epoch is synced+1 = 3, reported on the Pod.
	poll(t, ctx, "epoch 3 on the Pod", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "worker-0", metav1.GetOptions{})
		return err == nil && p.Annotations[jobset.EpochKey] == "3"
	})
	barrier := fmt.Sprintf("http://127.0.0.1:%d%s", port, protocol.BarrierPath)
	if code := get(t, barrier); code != http.StatusServiceUnavailable {
		t.Fatalf("barrier answers %d before the epoch is synced", code)
	}

	update := func(b protocol.Broadcast) {
		cm.Data = protocol.EncodeBroadcast(b)
		var err error
		if cm, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 2})
	poll(t, ctx, "the barrier lifted", func() bool { return get(t, barrier) == http.StatusOK })

	update(protocol.Broadcast{SyncedEpoch: 3, DeprecatedEpoch: 3})
	select {
	case code := <-done:
		if code != 88 {
			t.Errorf("exit code %d, want the restart code 88", code)
		}
	case <-ctx.Done():
		t.Fatal("the agent did not exit once its epoch was deprecated")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a local test endpoint
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func poll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestRequestsRetriedByTheAgent: a refusal (429) or a timeout of the
// agent's read of its Pod or of its epoch patch is retried by the agent
// (client-go's own retries are off), after at least the Retry-After the
// API server sent; a Pod that is gone is final.
func TestRequestsRetriedByTheAgent(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "ns", Annotations: map[string]string{jobset.EpochKey: "3"}}}
	var mu sync.Mutex
	failed := map[string]int{}        // by method
	refused := map[string]time.Time{} // by method: when the second refusal was sent
	retried := map[string]time.Time{} // by method: when the request after it came
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods/worker-0" {
			writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), path.Base(r.URL.Path)))
			return
		}
		mu.Lock()
		n := failed[r.Method]
		failed[r.Method]++
		switch n {
		case 1:
			refused[r.Method] = time.Now()
		case 2:
			retried[r.Method] = time.Now()
		}
		mu.Unlock()
		switch n {
		case 0, 1:
			// As API Priority and Fairness refuses a request.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		case 2:
			writeStatus(w, apierrors.NewServerTimeout(corev1.Resource("pods"), "get", 1))
			return
		}
		mu.Lock()
		failed[r.Method]--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pod)
	}))
	defer srv.Close()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	k := &KubeTransport{Client: cs, Namespace: "ns", Pod: "worker-0", Log: testr.New(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	epoch, _, err := k.Self(ctx)
	if err != nil {
		t.Fatalf("Self after two refusals and a timeout: %v", err)
	}
	if _, err := report(ctx, testr.New(t), k, k.ReportEpoch, 4); err != nil {
		t.Fatalf("reporting the epoch after two refusals and a timeout: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if epoch != 3 || failed[http.MethodGet] != 3 || failed[http.MethodPatch] != 3 {
		t.Errorf("epoch %d after %d failed reads and %d failed patches, want 3 after 3 and 3", epoch, failed[http.MethodGet], failed[http.MethodPatch])
	}
	for _, m := range []string{http.MethodGet, http.MethodPatch} {
		if waited := retried[m].Sub(refused[m]); waited < time.Second {
			t.Errorf("%s sent again %v after a refusal with Retry-After: 1, want at least 1s", m, waited)
		}
	}

	gone := &KubeTransport{Client: cs, Namespace: "ns", Pod: "worker-1", Log: testr.New(t)}
	if _, _, err := gone.Self(ctx); !apierrors.IsNotFound(err) {
		t.Errorf("Self of a deleted Pod: %v, want NotFound at once", err)
	}
}

// TestRetryDelaySpreadsTheRetryAfter: after a refusal with Retry-After
// the agents wait about that long, spread over as long again, so that
// agents refused in the same second do not come back in the same second;
// the wait follows the server's Retry-After only as far as the request's
// own refusals bear it out (1 s after the first, doubling), since the
// server's value stays high after a burst; other failures wait the short
// backoff.
func TestRetryDelaySpreadsTheRetryAfter(t *testing.T) {
	refusal := func(seconds int) error {
		return apierrors.NewTooManyRequests("Too many requests, please try again later.", seconds)
	}
	// Retry-After: 8, refused again and again: the waits grow 1, 2, 4, 8 s
	// (each spread over as long again) and stay at the server's 8 s.
	wantLow := []time.Duration{1, 2, 4, 8, 8, 8}
	lo := make([]time.Duration, len(wantLow))
	hi := make([]time.Duration, len(wantLow))
	for i := range lo {
		lo[i] = time.Hour
	}
	for range 200 {
		d := newRetryDelay()
		for i, w := range wantLow {
			got := d.after(refusal(8))
			if got < w*time.Second || got >= 2*w*time.Second {
				t.Fatalf("refusal %d with Retry-After: 8: delay %v, want within [%v, %v)", i+1, got, w*time.Second, 2*w*time.Second)
			}
			lo[i], hi[i] = min(lo[i], got), max(hi[i], got)
		}
	}
	for i, w := range wantLow {
		if hi[i]-lo[i] < w*time.Second/2 {
			t.Errorf("refusal %d: 200 agents come back within %v of each other, want spread over most of %v", i+1, hi[i]-lo[i], w*time.Second)
		}
	}

	// The server's Retry-After, high after an earlier burst, does not hold
	// an agent refused once for long.
	if got := newRetryDelay().after(refusal(32)); got >= 2*time.Second {
		t.Errorf("first refusal with Retry-After: 32: delay %v, want under 2s", got)
	}

	timeout := apierrors.NewServerTimeout(corev1.Resource("pods"), "get", 1)
	if got := newRetryDelay().after(timeout); got > 100*time.Millisecond {
		t.Errorf("first delay after a timeout %v, want the backoff's first step (50ms ± 50%%)", got)
	}
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// TestRetryGoesOnPastTheCap: the retries of a request go on once the
// backoff has reached its cap, until the request succeeds.
func TestRetryGoesOnPastTheCap(t *testing.T) {
	b := wait.Backoff{Duration: time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 4 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := retry(ctx, &retryDelay{backoff: b}, func(context.Context) error {
		calls++
		if calls == 20 {
			return nil
		}
		return fmt.Errorf("try %d failed", calls)
	}, nil)
	if err != nil || calls != 20 {
		t.Errorf("retry gave %v after %d calls, want success at the 20th (the cap is reached at the 3rd)", err, calls)
	}
}

func TestWorkersOf(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	sec := func(d int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(d) * time.Second)) }
	agent := corev1.Container{Name: "inplace-agent", Env: []corev1.EnvVar{{Name: protocol.EnvRestartExitCode, Value: "88"}}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: sec(0)}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	ended := func(at int) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: sec(at - 1), FinishedAt: sec(at)}}
	}
	pod := func(previousAgentRun *int, workers ...corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{agent}}}
		s := corev1.ContainerStatus{Name: agent.Name, State: running}
		if previousAgentRun != nil {
			s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, StartedAt: sec(*previousAgentRun)}}
		}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{s}
		p.Status.ContainerStatuses = workers
		return p
	}
	worker := func(state, last corev1.ContainerState) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "trainer", State: state, LastTerminationState: last}
	}
	five := 5
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want Workers
	}{
		"every worker runs":                                                     {pod: pod(nil, worker(running, corev1.ContainerState{})), want: WorkersRunning},
		"the agent's first run, workers not started":                            {pod: pod(nil, worker(waiting, corev1.ContainerState{})), want: WorkersStopped},
		"the agent restarted alone, workers never started":                      {pod: pod(&five, worker(waiting, corev1.ContainerState{})), want: WorkersWaiting},
		"the agent restarted alone, workers last ended before its previous run": {pod: pod(&five, worker(waiting, ended(3))), want: WorkersWaiting},
		"a worker ended in the second the previous run started":                 {pod: pod(&five, worker(waiting, ended(5))), want: WorkersWaiting},
		"a worker ended during the previous run (the Pod restarted in place)":   {pod: pod(&five, worker(waiting, ended(7))), want: WorkersStopped},
		"a worker exited during the previous run and is not restarted yet":      {pod: pod(&five, worker(ended(7), corev1.ContainerState{})), want: WorkersStopped},
		"the agent's previous run was ended by a restart of the whole Pod": {pod: func() *corev1.Pod {
			p := pod(&five, worker(waiting, ended(5)))
			p.Status.InitContainerStatuses[0].LastTerminationState.Terminated.Reason = "RestartingAllContainers"
			return p
		}(), want: WorkersStopped},
		"a worker's last end has no time":   {pod: pod(&five, worker(waiting, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}})), want: WorkersStopped},
		"one worker runs, another does not": {pod: pod(&five, worker(running, corev1.ContainerState{}), worker(waiting, corev1.ContainerState{})), want: WorkersStopped},
	} {
		t.Run(name, func(t *testing.T) {
			if got := workersOf(tc.pod); got != tc.want {
				t.Errorf("workersOf = %v, want %v", got, tc.want)
			}
		})
	}
}
