package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// versionFile, at the repository's root, holds the version the tree names:
// the Makefile's default VERSION reads it, and version_test.go checks that
// every file that cannot read it (config/, the chart, the test images,
// the docs, the CHANGELOG) names the same.
const versionFile = "VERSION"

// treeVersion is the version of the tree at root, as versionFile says it.
func treeVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, versionFile))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if err := checkVersion(v); err != nil {
		return "", fmt.Errorf("%s: %w", versionFile, err)
	}
	return v, nil
}
