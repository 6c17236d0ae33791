package state

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
)

// counted is a family's totals in a comparable form.
type counted struct {
	RJs                   map[string]JobCounts
	Previous, Terminating int32
	// Pods by attempt, class and name.
	Pods map[string]map[string][]string
}

// countedOf reads the running totals of a family.
func countedOf(f *Family) counted {
	c := counted{RJs: map[string]JobCounts{}, Previous: f.previous, Terminating: f.terminating, Pods: map[string]map[string][]string{}}
	for name, r := range f.rjs {
		c.RJs[name] = *r
	}
	for attempt, a := range f.attempts {
		if a.n == 0 {
			continue
		}
		c.Pods[attempt] = map[string][]string{}
		n := 0
		for class, names := range a.classes {
			g := PodGroup{Names: names}
			c.Pods[attempt][fmt.Sprintf("%+v", class)] = g.SortedNames()
			n += len(names)
		}
		if n != a.n {
			c.Pods[attempt]["count"] = []string{strconv.Itoa(a.n), "≠", strconv.Itoa(n)}
		}
	}
	return c
}

// countedFromScratch computes what the totals must be from the objects
// themselves, by the definitions the controller used before it kept
// totals: isCurrentAttempt for the Jobs, the restart-attempt label for the
// Pods.
func countedFromScratch(js *jobset.JobSet, jobs map[string]*batchv1.Job, pods map[string]*corev1.Pod) counted {
	c := counted{RJs: map[string]JobCounts{}, Pods: map[string]map[string][]string{}}
	for _, rj := range js.Spec.ReplicatedJobs {
		c.RJs[rj.Name] = JobCounts{Sizes: map[[2]int32]int32{}}
	}
	for _, job := range jobs {
		switch {
		case job.DeletionTimestamp != nil:
			c.Terminating++
			continue
		case !isCurrentAttempt(js, job):
			c.Previous++
			continue
		}
		rj := job.Labels[jobset.ReplicatedJobNameKey]
		r := c.RJs[rj]
		index, _ := strconv.Atoi(job.Labels[jobset.JobIndexKey])
		if job.Name == JobName(js.Name, rj, index) {
			r.Named++
		}
		switch {
		case JobFinished(job, batchv1.JobFailed):
			r.Failed++
		case JobFinished(job, batchv1.JobComplete):
			r.Succeeded++
		default:
			r.Unfinished++
			if ptr.Deref(job.Spec.Suspend, false) {
				r.Suspended++
			} else if job.Status.Active > 0 {
				r.Running++
			}
			if JobReady(job) {
				r.Ready++
			}
			if JobFinished(job, batchv1.JobFailureTarget) {
				r.Failing++
			}
			r.Sizes[[2]int32{ptr.Deref(job.Spec.Parallelism, -1), ptr.Deref(job.Spec.Completions, -1)}]++
		}
		c.RJs[rj] = r
	}
	for _, pod := range pods {
		attempt := pod.Labels[jobset.RestartsKey]
		if c.Pods[attempt] == nil {
			c.Pods[attempt] = map[string][]string{}
		}
		class := fmt.Sprintf("%+v", podClassOf(pod))
		c.Pods[attempt][class] = append(c.Pods[attempt][class], pod.Name)
	}
	for _, classes := range c.Pods {
		for _, names := range classes {
			slices.Sort(names)
		}
	}
	return c
}

func TestCanonicalInt(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 99, 100, 4999, math.MaxInt32} {
		if got := canonicalInt(strconv.FormatInt(n, 10)); int64(got) != n {
			t.Errorf("canonicalInt(%q) = %d", strconv.FormatInt(n, 10), got)
		}
	}
	for _, s := range []string{"", "01", "00", "+1", "-1", "-0", "1x", " 1", "2147483648", "99999999999999999999"} {
		if got := canonicalInt(s); got != -1 {
			t.Errorf("canonicalInt(%q) = %d, want -1", s, got)
		}
	}
}
