// Package upstreamjobset pins upstream JobSet (sigs.k8s.io/jobset) at the
// release the project is compatible with, so that
// hack/build-cluster-binaries.sh builds its end-to-end suite from the
// module itself, not from a copy: the suite runs against inplace's drop-in
// install (config/jobset-names) in test/e2e/upstream.
package upstreamjobset

// The imports of the suite's test files (sigs.k8s.io/jobset/test/e2e) that
// its other packages do not import already: 'go mod tidy' keeps a module
// in go.mod and go.sum only for a package something here imports, and
// 'go test -c' of a dependency's package needs them all.
import (
	_ "github.com/google/go-cmp/cmp/cmpopts"
	_ "k8s.io/cli-runtime/pkg/printers"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config"
	_ "sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"
	_ "sigs.k8s.io/jobset/pkg/util/testing"
	_ "sigs.k8s.io/jobset/test/util"
)
