package modules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is a module pinned by a wrapper module under hack/.
type Module struct {
	// Wrapper is the wrapper's directory under hack/.
	Wrapper string
	// Path is the module's path.
	Path string
	// Version is the version the suites are written for: Dir refuses a
	// wrapper that pins another.
	Version string
}

// Dir is the module's directory in the module cache, at the version its
// wrapper pins: go's own, as the user running the tests has it.
func (m Module) Dir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", m.Path)
	cmd.Dir = filepath.Join(root, "hack", m.Wrapper)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s in hack/%s: %w", m.Path, m.Wrapper, exitError(err))
	}
	version, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if version != m.Version {
		return "", fmt.Errorf("hack/%s pins %s %s, the suites are written for %s", m.Wrapper, m.Path, version, m.Version)
	}
	if dir == "" {
		return "", fmt.Errorf("%s %s is not in the module cache: run 'make cluster-binaries'", m.Path, version)
	}
	return dir, nil
}

// Kustomize renders the kustomization written into dir by kustomization
// (its resources may name the module's directories under "module/",
// a link to Dir) with the kustomize the repository builds (KUSTOMIZE, or
// bin/kustomize-*), and writes it to dir/install.yaml, whose path it
// returns: what `kubectl apply --server-side -f` takes.
func (m Module) Kustomize(ctx context.Context, root, dir, kustomization string) (string, error) {
	module, err := m.Dir(ctx, root)
	if err != nil {
		return "", err
	}
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		found, _ := filepath.Glob(filepath.Join(root, "bin", "kustomize-*"))
		if len(found) != 1 {
			return "", fmt.Errorf("want one kustomize in bin/, found %d: run 'make kustomize'", len(found))
		}
		kustomize = found[0]
	}
	work := filepath.Join(dir, "overlay")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	if err := os.Symlink(module, filepath.Join(work, "module")); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(work, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return "", err
	}
	// The overlay names files of the module, outside its own directory.
	out, err := exec.CommandContext(ctx, kustomize, "build", "--load-restrictor", "LoadRestrictionsNone", work).Output()
	if err != nil {
		return "", fmt.Errorf("kustomize build of %s's install: %w", m.Path, exitError(err))
	}
	path := filepath.Join(dir, "install.yaml")
	return path, os.WriteFile(path, out, 0o644)
}

// exitError adds what a command wrote to its standard error.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
