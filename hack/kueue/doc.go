// Package kueue pins Kueue (sigs.k8s.io/kueue) at the release the project
// is tested with, so that hack/build-cluster-binaries.sh builds its
// controller manager and its JobSet end-to-end specs from the module
// itself, not from a copy: test/e2e/kueue deploys the one and runs the
// other against inplace installed under upstream JobSet's names.
package kueue

// The imports of the suite's test files
// (sigs.k8s.io/kueue/test/e2e/singlecluster/extended) that Kueue's other
// packages do not import already: 'go mod tidy' keeps a module in go.mod
// and go.sum only for a package something here imports, and 'go test -c'
// of a dependency's package needs them all.
import (
	_ "sigs.k8s.io/kueue/test/util"
)
