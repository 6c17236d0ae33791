// Package images builds the project's container images without a container
// engine or a registry: the manager, the agent, the test worker and a pause
// image, each a static Go binary in one layer, written with
// go-containerregistry as archives that each real node's containerd imports.
// They run the same binaries as the Dockerfile's images, under the same
// names as config/ uses.
//
// Test code: it may import any package of the module, and no package outside
// test/ and perf/ (the benchmarks) may import it.
package images
