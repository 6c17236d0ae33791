package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/inplace-dev/inplace/policies"
)

// APIVersion and Kind of a suite file.
const (
	APIVersion = "policy.inplace.dev/v1alpha1"
	Kind       = "PolicySuite"
)

// FileName is the name `inplacectl policy test` looks for.
const FileName = "suite.yaml"

// Expect is a case's expected outcome.
type Expect string

// The outcomes: deny if the policy denies, else warn if it warns, else
// allow (a DryRun policy's messages admit the JobSet: allow).
const (
	ExpectDeny  Expect = "deny"
	ExpectWarn  Expect = "warn"
	ExpectAllow Expect = "allow"
)

// Suite is a suite file: one policy and the cases it is run on. Paths are
// relative to the suite file's directory.
type Suite struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Policy is a JobSetPolicy manifest.
	Policy string `json:"policy"`
	// Inventory are YAML files (several documents, or a v1 List) of the
	// objects put into data.inventory: an object with metadata.namespace
	// under data.inventory.namespace, one without under
	// data.inventory.cluster.
	Inventory []string `json:"inventory,omitempty"`
	Cases     []Case   `json:"cases"`

	// dir is the suite file's directory, path the file.
	dir, path string
}

// Case is one admission request and what the policy must decide.
type Case struct {
	Name string `json:"name"`
	// Object is a JobSet manifest.
	Object string `json:"object"`
	// Namespace of the request; default the object's, or "default".
	Namespace string `json:"namespace,omitempty"`
	// Operation is CREATE (the default) or UPDATE.
	Operation string `json:"operation,omitempty"`
	// OldObject is the stored JobSet's manifest, on UPDATE (it is
	// defaulted and injected too, as it was when it was created).
	OldObject string `json:"oldObject,omitempty"`
	// UserInfo is the requesting user; default one with no name and no
	// groups.
	UserInfo *policies.UserInfo `json:"userInfo,omitempty"`
	// Parameters replace the policy's spec.parameters for this case; its
	// parametersSchema still applies (defaults and validation).
	Parameters map[string]any `json:"parameters,omitempty"`
	// Expect is deny, warn or allow.
	Expect Expect `json:"expect"`
	// Messages must each be a substring of some message of the policy.
	Messages []string `json:"messages,omitempty"`
}

// Path is the suite file.
func (s *Suite) Path() string { return s.path }

// Load reads and checks a suite file, or the suite.yaml of a directory.
// An unknown field, a missing required one, a wrong value or a file that
// does not exist is an error naming the suite file and the field.
func Load(path string) (*Suite, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Suite{dir: filepath.Dir(path), path: path}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func (s *Suite) validate() error {
	if s.APIVersion != APIVersion {
		return fmt.Errorf("apiVersion: %q, want %s", s.APIVersion, APIVersion)
	}
	if s.Kind != Kind {
		return fmt.Errorf("kind: %q, want %s", s.Kind, Kind)
	}
	if s.Policy == "" {
		return fmt.Errorf("policy: required: the path of a JobSetPolicy manifest")
	}
	if err := s.exists("policy", s.Policy); err != nil {
		return err
	}
	for i, f := range s.Inventory {
		if err := s.exists(fmt.Sprintf("inventory[%d]", i), f); err != nil {
			return err
		}
	}
	if len(s.Cases) == 0 {
		return fmt.Errorf("cases: required: at least one")
	}
	var names []string
	for i := range s.Cases {
		c := &s.Cases[i]
		at := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("%s.name: required", at)
		}
		if slices.Contains(names, c.Name) {
			return fmt.Errorf("%s.name: %q names an earlier case too", at, c.Name)
		}
		names = append(names, c.Name)
		if c.Object == "" {
			return fmt.Errorf("%s.object: required: the path of a JobSet manifest", at)
		}
		if err := s.exists(at+".object", c.Object); err != nil {
			return err
		}
		switch c.Operation {
		case "":
			c.Operation = "CREATE"
		case "CREATE", "UPDATE":
		default:
			return fmt.Errorf("%s.operation: %q is not CREATE or UPDATE", at, c.Operation)
		}
		if c.Operation == "UPDATE" && c.OldObject == "" {
			return fmt.Errorf("%s.oldObject: required with operation UPDATE", at)
		}
		if c.Operation == "CREATE" && c.OldObject != "" {
			return fmt.Errorf("%s.oldObject: only with operation UPDATE", at)
		}
		if c.OldObject != "" {
			if err := s.exists(at+".oldObject", c.OldObject); err != nil {
				return err
			}
		}
		switch c.Expect {
		case ExpectDeny, ExpectWarn, ExpectAllow:
		case "":
			return fmt.Errorf("%s.expect: required: deny, warn or allow", at)
		default:
			return fmt.Errorf("%s.expect: %q is not deny, warn or allow", at, c.Expect)
		}
	}
	return nil
}

// exists checks that a path the suite names is a file.
func (s *Suite) exists(field, rel string) error {
	fi, err := os.Stat(s.resolve(rel))
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: %s is a directory, want a file", field, s.resolve(rel))
	}
	return nil
}

func (s *Suite) resolve(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(s.dir, rel)
}

// Find returns the suite files under root, recursively, in lexical order.
func Find(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == FileName {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}
