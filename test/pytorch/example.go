package pytorch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// Container is the training container's name in the example: torchrun's,
// or in-process, local rank 0's.
const Container = "pytorch"

// The example's manifests.
const (
	// Manifest runs torchrun in a container per Pod.
	Manifest = "jobset.yaml"
	// InProcessManifest runs a rank per container, in-process scope.
	InProcessManifest = "jobset-in-process.yaml"
)

// Example is one of examples/pytorch's manifests: a ServiceAccount and a
// JobSet.
type Example struct {
	ServiceAccount *corev1.ServiceAccount
	JobSet         *jobset.JobSet
}

// Load reads examples/pytorch/jobset.yaml under the repository root into
// namespace ns; see LoadManifest.
func Load(root, ns string) (*Example, error) {
	return LoadManifest(root, ns, Manifest)
}

// LoadManifest reads the manifest of examples/pytorch under the
// repository root, each object strictly (a field the types do not know is
// an error), into namespace ns.
func LoadManifest(root, ns, manifest string) (*Example, error) {
	path := filepath.Join(root, "examples", "pytorch", manifest)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ex := &Example{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			ex.ServiceAccount = &corev1.ServiceAccount{}
			err = yaml.UnmarshalStrict(doc, ex.ServiceAccount)
		case "JobSet":
			ex.JobSet = &jobset.JobSet{}
			err = yaml.UnmarshalStrict(doc, ex.JobSet)
		default:
			err = fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if ex.ServiceAccount == nil || ex.JobSet == nil {
		return nil, fmt.Errorf("%s: want a ServiceAccount and a JobSet", path)
	}
	ex.ServiceAccount.Namespace, ex.JobSet.Namespace = ns, ns
	return ex, nil
}

// SetRun sets the training program's length: steps in all, a checkpoint
// every checkpointEvery.
func (ex *Example) SetRun(steps, checkpointEvery int) {
	for i := range ex.pod().Containers {
		c := &ex.pod().Containers[i]
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "TRAIN_STEPS", Value: strconv.Itoa(steps)},
			corev1.EnvVar{Name: "CHECKPOINT_EVERY", Value: strconv.Itoa(checkpointEvery)})
	}
}

// Containers are the names of the example's training containers: one
// per Pod with torchrun, one per local rank in-process.
func (ex *Example) Containers() []string {
	var out []string
	for _, c := range ex.pod().Containers {
		out = append(out, c.Name)
	}
	return out
}

// UseRecreate makes the example restart by recreating its Pods, its
// checkpoints on dir, a host directory: every node of the local cluster is
// this host, so the directory is storage all Pods share, as a
// ReadWriteMany claim is on a cluster. A failed Pod fails its Job (what the
// webhook sets for InPlaceRestart, written out here).
func (ex *Example) UseRecreate(dir string) {
	ex.JobSet.Spec.FailurePolicy.RestartStrategy = jobset.Recreate
	ex.JobSet.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
	ex.pod().Volumes = []corev1.Volume{{Name: "checkpoints", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
	}}}
}

func (ex *Example) pod() *corev1.PodSpec {
	return &ex.JobSet.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
}

// Nodes is how many Pods (one per node) the example runs.
func (ex *Example) Nodes() int {
	return int(ptr.Deref(ex.JobSet.Spec.ReplicatedJobs[0].Template.Spec.Parallelism, 1))
}

// PodHostname is the hostname of the example's Pod of completion index i.
func (ex *Example) PodHostname(i int) string {
	return fmt.Sprintf("%s-%s-0-%d", ex.JobSet.Name, ex.JobSet.Spec.ReplicatedJobs[0].Name, i)
}
