package agent

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/inplace-dev/inplace/api/protocol"
)

// podTransport is a Pod as the API server keeps it, with the agents'
// admission policy: a report below the Pod's epoch is refused.
type podTransport struct {
	broadcasts []protocol.Broadcast

	mu      sync.Mutex
	epoch   int32
	workers Workers
	reads   int
	reports []int32
}

func (p *podTransport) Broadcasts(context.Context) (<-chan protocol.Broadcast, error) {
	ch := make(chan protocol.Broadcast, len(p.broadcasts))
	for _, b := range p.broadcasts {
		ch <- b
	}
	return ch, nil
}

func (p *podTransport) ReportEpoch(_ context.Context, epoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, epoch)
	if epoch < p.epoch {
		// As KubeTransport reports the policy's refusal.
		return fmt.Errorf("%w: %w", ErrReportRefused, apierrors.NewForbidden(corev1.Resource("pods"), "worker-0", nil))
	}
	p.epoch = epoch
	return nil
}

func (p *podTransport) Self(context.Context) (int32, Workers, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	return p.epoch, p.workers, nil
}

// TestRunReadsItsPodOnlyWhenItMust: an agent restarted with its Pod knows
// from its environment all it needs, and sends its report alone; it reads
// its Pod only when its environment leaves the start open (the epoch
// given is not deprecated, or none is given), or once its report is
// refused because the Pod carries a later epoch than the one given.
func TestRunReadsItsPodOnlyWhenItMust(t *testing.T) {
	deprecateAll := protocol.Broadcast{SyncedEpoch: 100, DeprecatedEpoch: 100}
	cases := map[string]struct {
		// setup
		envEpoch *int32
		podEpoch int32
		workers  Workers
		first    protocol.Broadcast
		// want
		reads   int
		reports []int32
	}{
		"first start, no epoch on the Pod yet: report synced+1, no read": {
			envEpoch: ptr.To[int32](0),
			first:    protocol.Broadcast{},
			reports:  []int32{1},
		},
		"restarted in place with its Pod, its epoch deprecated: report synced+1, no read": {
			envEpoch: ptr.To[int32](2), podEpoch: 2,
			first:   protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2},
			reports: []int32{3},
		},
		"restarted alone, its workers running at the synced epoch: read, resume, no report": {
			envEpoch: ptr.To[int32](2), podEpoch: 2, workers: WorkersRunning,
			first: protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1},
			reads: 1,
		},
		"its worker failed before the epoch was deprecated: read, workers not running, a new epoch": {
			envEpoch: ptr.To[int32](2), podEpoch: 2,
			first:   protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 1},
			reads:   1,
			reports: []int32{3},
		},
		"no epoch in its environment (injected by an older manager): read, as before": {
			podEpoch: 2,
			first:    protocol.Broadcast{SyncedEpoch: 2, DeprecatedEpoch: 2},
			reads:    1,
			reports:  []int32{3},
		},
		"the kubelet's copy of the Pod was behind: the report is refused, the agent reads and takes the Pod's epoch": {
			envEpoch: ptr.To[int32](1), podEpoch: 3,
			first:   protocol.Broadcast{SyncedEpoch: 1, DeprecatedEpoch: 1},
			reads:   1,
			reports: []int32{2, 3},
		},
		"in-place restarts off: nothing to read nor report": {
			first: protocol.Broadcast{Disabled: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &podTransport{broadcasts: []protocol.Broadcast{tc.first, deprecateAll}, epoch: tc.podEpoch, workers: tc.workers}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.first.Disabled {
				// Nothing ends a disabled agent but its Pod's end.
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			if _, err := Run(ctx, testr.New(t), Config{ReplicatedJob: "workers", RestartExitCode: 88, Listener: l, PodEpoch: tc.envEpoch}, p); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.reads != tc.reads {
				t.Errorf("%d reads of the Pod, want %d", p.reads, tc.reads)
			}
			if diff := cmp.Diff(tc.reports, p.reports); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEpochFromEnv(t *testing.T) {
	cases := map[string]struct {
		value string
		set   bool
		want  *int32
	}{
		"unset: not known":                       {},
		"empty: the Pod had no epoch":            {set: true, want: ptr.To[int32](0)},
		"an epoch":                               {value: "7", set: true, want: ptr.To[int32](7)},
		"not a number: not known, the Pod tells": {value: "x", set: true},
		"negative: not known":                    {value: "-1", set: true},
		"beyond int32: not known":                {value: "2147483648", set: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, EpochFromEnv(tc.value, tc.set)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestConfigFromEnv: the injected environment configures the agent, the
// optional variables of newer managers included; what is missing or wrong
// is named.
func TestConfigFromEnv(t *testing.T) {
	full := map[string]string{
		protocol.EnvReplicatedJobName: "workers", protocol.EnvBarrierPort: "8095", protocol.EnvRestartExitCode: "88",
		protocol.EnvBarrierHold: "900", protocol.EnvPodEpoch: "3",
	}
	without := func(drop ...string) map[string]string {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		for _, k := range drop {
			delete(env, k)
		}
		return env
	}
	with := func(k, v string) map[string]string {
		env := without()
		env[k] = v
		return env
	}
	cases := map[string]struct {
		env     map[string]string
		want    Config
		wantErr string
	}{
		"everything": {env: full, want: Config{ReplicatedJob: "workers", Listen: ":8095", RestartExitCode: 88, BarrierHold: 900 * time.Millisecond, PodEpoch: ptr.To[int32](3)}},
		"an older manager's: no hold, no epoch": {env: without(protocol.EnvBarrierHold, protocol.EnvPodEpoch),
			want: Config{ReplicatedJob: "workers", Listen: ":8095", RestartExitCode: 88}},
		"missing":                {env: without(protocol.EnvReplicatedJobName, protocol.EnvRestartExitCode), wantErr: protocol.EnvReplicatedJobName + ", " + protocol.EnvRestartExitCode + " are not set"},
		"a code that is not one": {env: with(protocol.EnvRestartExitCode, "x"), wantErr: protocol.EnvRestartExitCode},
		"a negative hold":        {env: with(protocol.EnvBarrierHold, "-1"), wantErr: protocol.EnvBarrierHold + `="-1"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
