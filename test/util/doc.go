// Package util holds assertions that integration and end-to-end tests share:
// creating nodes, waiting for a namespace's service account, loading a
// spec's manifest, acting as a kubelet on Pods, and comparing objects field
// by field. It asserts with Gomega, so only tests import it; programs build
// their objects with package wrappers.
//
// Test code: it may import any package of the module, and no package outside
// test/ may import it.
package util
