package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inplace-dev/inplace/api/protocol"
	"github.com/inplace-dev/inplace/test/cluster"
)

// TestDockerfileBuilds runs, for every build stage of the Dockerfile, the
// stage's go build on a tree that holds only what the Dockerfile copies, so
// a missing COPY fails here and not on a machine that can build images.
func TestDockerfileBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the images' binaries")
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	for _, name := range []string{"build-agent", "build-supervisor", "build-manager"} {
		st, ok := stages[name]
		if !ok {
			t.Fatalf("the Dockerfile has no stage %s", name)
		}
		t.Run(name, func(t *testing.T) {
			src := t.TempDir()
			out := t.TempDir()
			for _, s := range append(stages["deps"].copies, st.copies...) {
				from := filepath.Join(root, s)
				if _, err := os.Stat(from); err != nil {
					t.Fatalf("the Dockerfile copies %s, which does not exist", s)
				}
				to := filepath.Join(src, s)
				if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
					t.Fatal(err)
				}
				if b, err := exec.Command("cp", "-r", strings.TrimSuffix(from, "/"), to).CombinedOutput(); err != nil {
					t.Fatalf("copying %s: %v: %s", s, err, b)
				}
			}
			if len(st.runs) == 0 {
				t.Fatalf("stage %s runs no go build", name)
			}
			for _, run := range st.runs {
				script := strings.ReplaceAll(run, "/out/", out+"/")
				cmd := exec.Command("sh", "-c", script)
				cmd.Dir = src
				cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH=amd64")
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", run, err, b)
				}
			}
			entries, err := os.ReadDir(out)
			if err != nil || len(entries) != 1 {
				t.Fatalf("stage %s built %d binaries, want 1 (%v)", name, len(entries), err)
			}
		})
	}
}

type stage struct {
	copies []string // sources copied from the build context
	runs   []string // go build commands
}

func parseDockerfile(t *testing.T, path string) map[string]*stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]*stage{}
	var cur *stage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			cur = &stage{}
			for i, f := range fields {
				if strings.EqualFold(f, "AS") && i+1 < len(fields) {
					stages[fields[i+1]] = cur
				}
			}
		case "COPY":
			if cur == nil || strings.HasPrefix(fields[1], "--from") {
				continue
			}
			sources, dest := fields[1:len(fields)-1], fields[len(fields)-1]
			// The build tree mirrors the context: a source lands at its own
			// path (or several in ./).
			if dest != "./" && (len(sources) != 1 || sources[0] != dest) {
				t.Fatalf("COPY %v %s: copy a path to the same path, so the build tree mirrors the repository", sources, dest)
			}
			cur.copies = append(cur.copies, sources...)
		case "RUN":
			if cur != nil && strings.Contains(sc.Text(), "go build") {
				cur.runs = append(cur.runs, strings.TrimSpace(strings.TrimPrefix(sc.Text(), fields[0])))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestDockerfilePutsTheSupervisorWhereTheHookRunsIt: the agent's image
// carries the supervisor at the path the webhook's postStart hook runs
// (the test images are built from the same constant).
func TestDockerfilePutsTheSupervisorWhereTheHookRunsIt(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	want := "COPY --from=build-supervisor /out/inplace-supervisor " + protocol.ImageSupervisorBinary
	if !strings.Contains(string(data), want) {
		t.Errorf("the Dockerfile has no %q", want)
	}
}
