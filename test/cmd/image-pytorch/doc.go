// Command image-pytorch builds the image of examples/pytorch without a
// container engine (package test/images), prints its size, and imports it
// into the real nodes of a running local cluster (`make cluster-up
// REAL_NODES=2`), which list their containerd addresses in
// .local/containerd-sockets. `make image-pytorch` runs it.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package main
