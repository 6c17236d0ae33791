// Package kueue installs Kueue, as hack/kueue pins it, in the local
// cluster: its controller manager built from its module, deployed with the
// module's own manifests (config/default, what its release manifests are
// made of), and the images its JobSet end-to-end specs run.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package kueue
