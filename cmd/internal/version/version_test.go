package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	i := Info{Version: "v0.9.0", Commit: "1a2b3c4d5e6f7a8b9c0d", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if got, want := i.String(), "v0.9.0 (commit 1a2b3c4d5e6f, go1.26.8 linux/amd64)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	i.Commit = ""
	if got := i.String(); !strings.Contains(got, "commit unknown") {
		t.Errorf("String() without a commit = %q", got)
	}
}

func TestGetIsStampedOrDev(t *testing.T) {
	i := Get()
	if i.Version == "" || i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get() = %+v", i)
	}
}
