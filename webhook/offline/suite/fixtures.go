package suite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	jobset "github.com/inplace-dev/inplace/api/jobset/v1alpha2"
	policyv1alpha1 "github.com/inplace-dev/inplace/api/policy/v1alpha1"
	"github.com/inplace-dev/inplace/policies"
)

// ReadPolicy reads a JobSetPolicy manifest; an unknown field is an error.
func ReadPolicy(path string) (*policyv1alpha1.JobSetPolicy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p policyv1alpha1.JobSetPolicy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Kind != "JobSetPolicy" {
		return nil, fmt.Errorf("%s: kind is %q, want JobSetPolicy", path, p.Kind)
	}
	if p.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name: required", path)
	}
	return &p, nil
}

// readJobSet reads a JobSet manifest; an unknown field is an error, as the
// API server's strict field validation makes it.
func readJobSet(path string) (*jobset.JobSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var js jobset.JobSet
	if err := yaml.UnmarshalStrict(data, &js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if js.Kind != jobset.Kind {
		return nil, fmt.Errorf("%s: kind is %q, want %s", path, js.Kind, jobset.Kind)
	}
	if js.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name: required", path)
	}
	return &js, nil
}

// readObjects reads the objects of a YAML file: each document, and the
// items of a document that is a List.
func readObjects(path string) ([]policies.InventoryObject, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []policies.InventoryObject
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if obj == nil {
			continue // an empty document, as after a trailing ---
		}
		items := []any{obj}
		if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") {
			items, _ = obj["items"].([]any)
		}
		for i, it := range items {
			o, _ := it.(map[string]any)
			item, err := inventoryObject(o)
			if err != nil {
				return nil, fmt.Errorf("%s: document %d, object %d: %w", path, doc, i, err)
			}
			out = append(out, item)
		}
	}
}

func inventoryObject(obj map[string]any) (policies.InventoryObject, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return policies.InventoryObject{}, fmt.Errorf("an object needs apiVersion, kind and metadata.name")
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return policies.InventoryObject{}, err
	}
	return policies.InventoryObject{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Object: obj, Size: len(raw)}, nil
}

// fill puts the objects into the inventory and returns the labels of the
// Namespaces among them, by name, for the policy's namespaceSelector.
func fill(ctx context.Context, inv *policies.Inventory, objs []policies.InventoryObject) (map[string]map[string]string, error) {
	nsLabels := map[string]map[string]string{}
	for _, o := range objs {
		if err := inv.Put(ctx, o); err != nil {
			return nil, err
		}
		if o.APIVersion != "v1" || o.Kind != "Namespace" {
			continue
		}
		meta, _ := o.Object["metadata"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		ls := map[string]string{}
		for k, v := range labels {
			ls[k] = fmt.Sprint(v)
		}
		nsLabels[o.Name] = ls
	}
	return nsLabels, nil
}
