package main

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// downloadURL is where a release's files are published (docs/how-to/release.md,
// "Cutting a release"): the krew manifest points at the plugin's archives
// there.
const downloadURL = "https://github.com/inplace-dev/inplace/releases/download"

// cliArchive is one platform's archive of the kubectl plugin.
type cliArchive struct {
	goos, goarch, name, sha256 string
}

// krewManifest is the plugin's manifest for krew, the kubectl plugin
// manager: `kubectl krew install --manifest=inplace.krew.yaml` installs the
// published archives, and with --archive a local one, checked against the
// same digests.
func krewManifest(version string, archives []cliArchive) ([]byte, error) {
	type file struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	type selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	type platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		Sha256   string   `json:"sha256"`
		Bin      string   `json:"bin"`
		Files    []file   `json:"files"`
	}
	var platforms []platform
	for _, a := range archives {
		platforms = append(platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": a.goos, "arch": a.goarch}},
			URI:      fmt.Sprintf("%s/%s/%s", downloadURL, version, a.name),
			Sha256:   a.sha256,
			Bin:      "kubectl-inplace",
			Files:    []file{{From: "kubectl-inplace", To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]string{"name": "inplace"},
		"spec": map[string]any{
			"version":          version,
			"homepage":         "https://github.com/inplace-dev/inplace",
			"shortDescription": "Check, render and follow JobSets that restart in place",
			"description": "The CLI of inplace, the JobSet controller that restarts training workers in place:\n" +
				"render a JobSet as the apiserver and the webhooks would admit it, evaluate and\n" +
				"test JobSetPolicies offline, show a JobSet's epochs and its last in-place\n" +
				"restart, and check a cluster's migration from upstream JobSet.\n",
			"platforms": platforms,
		},
	})
}
