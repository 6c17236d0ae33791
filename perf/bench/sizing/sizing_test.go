package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	got, err := parseSize("50x20x10")
	if err != nil || got != (size{JobSets: 50, Pods: 20, Policies: 10}) {
		t.Errorf("parseSize(50x20x10) = %+v, %v", got, err)
	}
	if got, err := parseSize("5x4x0"); err != nil || got.Policies != 0 {
		t.Errorf("parseSize(5x4x0) = %+v, %v: no policy is a row", got, err)
	}
	for _, bad := range []string{"50x20", "0x20x1", "5x0x1", "5x4x-1", "axbxc", ""} {
		if _, err := parseSize(bad); err == nil || !strings.Contains(err.Error(), "JxPxK") && !strings.Contains(err.Error(), "positive") {
			t.Errorf("parseSize(%q) = %v, want an error saying the form", bad, err)
		}
	}
}

func TestReadProcOfThisProcess(t *testing.T) {
	p, err := readProc(os.Getpid(), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", p.ppid, os.Getppid())
	}
	if p.peak < 1<<20 {
		t.Errorf("peak resident memory %d bytes: a Go test holds more than 1 MiB", p.peak)
	}
	if p.cpu < 0 {
		t.Errorf("CPU %v s", p.cpu)
	}
}
