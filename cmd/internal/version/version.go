package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by the linker; see the package comment.
var (
	version = "v0.0.0-dev"
	commit  = ""
)

// Info is a binary's build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's build.
func Get() Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if i.Commit == "" {
		// go build in a checkout records the revision.
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					i.Commit = s.Value
				}
			}
		}
	}
	return i
}

// String is the build on one line: "v0.9.0 (commit 1a2b3c4, go1.26.8 linux/amd64)".
func (i Info) String() string {
	c := i.Commit
	if c == "" {
		c = "unknown"
	} else if len(c) > 12 {
		c = c[:12]
	}
	return fmt.Sprintf("%s (commit %s, %s %s)", i.Version, c, i.GoVersion, i.Platform)
}
