// Package docs runs the commands of the how-to guides as a reader does,
// and checks that each prints what its page shows. A guide's files are
// written from the page's own blocks; its cluster is a real kube-apiserver
// and etcd (envtest), with the manager in-process and its webhooks served
// over TLS; kubectl is bin/kubectl, and inplacectl is built from the tree.
//
// Test code: it imports the harness (test/framework) and any package of the
// module; nothing imports it.
package docs
