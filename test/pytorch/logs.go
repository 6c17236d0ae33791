package pytorch

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	stepLine    = regexp.MustCompile(`^step (\d+) loss ([0-9.]+)$`)
	savedLine   = regexp.MustCompile(`^saved checkpoint at step (\d+)$`)
	resumedLine = regexp.MustCompile(`^rank (\d+) resumed from checkpoint at step (\d+)$`)
	crashLine   = regexp.MustCompile(`^rank (\d+) crashes with exit code (\d+) at step (\d+)`)
)

// Line is one line of a container's log, with the time the kubelet
// received it if the log was read with timestamps.
type Line struct {
	Time time.Time
	Text string
}

// ParseLog splits a container's log into lines; timestamped reads the
// RFC 3339 time the kubelet puts first with PodLogOptions.Timestamps.
func ParseLog(log string, timestamped bool) []Line {
	var out []Line
	for text := range strings.Lines(log) {
		text = strings.TrimRight(text, "\r\n")
		var l Line
		if timestamped {
			ts, rest, _ := strings.Cut(text, " ")
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				continue
			}
			l.Time, text = t, rest
		}
		l.Text = text
		out = append(out, l)
	}
	return out
}

// Run is what one run of the training program logged.
type Run struct {
	// Loss by step, from the Pod that logs steps.
	Loss map[int]float64
	// StepAt is when each step was logged (timestamped logs only).
	StepAt map[int]time.Time
	// Saved are the steps checkpointed.
	Saved []int
	// Resumed is the step each rank resumed from, by rank; ResumedAt when
	// the last rank logged it.
	Resumed   map[int]int
	ResumedAt time.Time
	// Crash is the exit a rank was asked for, at CrashStep, CrashAt.
	Crashed   bool
	CrashCode int
	CrashStep int
	CrashAt   time.Time
	Done      bool
}

// ReadRun reads the lines of one or more containers' logs of one run.
func ReadRun(lines ...[]Line) Run {
	r := Run{Loss: map[int]float64{}, StepAt: map[int]time.Time{}, Resumed: map[int]int{}}
	for _, ls := range lines {
		for _, l := range ls {
			atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
			switch m := match(l.Text); {
			case m.re == stepLine:
				step := atoi(m.sub[1])
				if v, err := strconv.ParseFloat(m.sub[2], 64); err == nil {
					r.Loss[step] = v
				}
				if t, seen := r.StepAt[step]; !seen || l.Time.Before(t) {
					r.StepAt[step] = l.Time
				}
			case m.re == savedLine:
				r.Saved = append(r.Saved, atoi(m.sub[1]))
			case m.re == resumedLine:
				r.Resumed[atoi(m.sub[1])] = atoi(m.sub[2])
				if l.Time.After(r.ResumedAt) {
					r.ResumedAt = l.Time
				}
			case m.re == crashLine:
				r.Crashed, r.CrashCode, r.CrashStep, r.CrashAt = true, atoi(m.sub[2]), atoi(m.sub[3]), l.Time
			case strings.HasPrefix(l.Text, "training done at step"):
				r.Done = true
			}
		}
	}
	return r
}

type matched struct {
	re  *regexp.Regexp
	sub []string
}

func match(text string) matched {
	for _, re := range []*regexp.Regexp{stepLine, savedLine, resumedLine, crashLine} {
		if sub := re.FindStringSubmatch(text); sub != nil {
			return matched{re, sub}
		}
	}
	return matched{}
}

// LastSaved is the newest checkpoint the run logged, 0 if none.
func (r Run) LastSaved() int {
	last := 0
	for _, s := range r.Saved {
		last = max(last, s)
	}
	return last
}

// ResumedStep is the step every rank resumed from, or an error saying
// which ranks did not or disagree. ranks is how many there are.
func (r Run) ResumedStep(ranks int) (int, error) {
	step, agree := r.Resumed[0], len(r.Resumed) == ranks
	for _, s := range r.Resumed {
		agree = agree && s == step
	}
	if !agree {
		return 0, fmt.Errorf("want every one of %d ranks to resume from one step, got (rank:step) %v", ranks, r.Resumed)
	}
	return step, nil
}
