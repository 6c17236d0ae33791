// Command release writes a release of inplace into a directory (dist/ by
// default), everything a cluster admin installs without building:
//
//	install.yaml                 config/default, images pinned to the version
//	install-selfsigned.yaml      config/selfsigned (no cert-manager), pinned
//	jobset-crd.yaml              the JobSet CRD alone (migration, upgrades)
//	inplace-X.Y.Z.tgz            the Helm chart, appVersion vX.Y.Z
//	inplace-manager-vX.Y.Z.tar   the manager's image, an OCI archive
//	inplace-agent-vX.Y.Z.tar     the agent's image (and the supervisor)
//	kubectl-inplace_vX.Y.Z_OS_ARCH.tar.gz
//	                             the CLI as a kubectl plugin, per platform
//	inplace.krew.yaml            the plugin's manifest for krew
//	images.txt                   the two images by tag and digest
//	SHA256SUMS                   the checksums of the files above
//
// `make release VERSION=vX.Y.Z` runs it; docs/how-to/release.md says how a release
// is cut and published. It is a tool of the repository, not of the product:
// it builds the images with test/images, as the local cluster does.
//
// The tree's own version is set in one place, the file VERSION at the
// repository's root; this package's tests fail naming the file and line of
// every image tag, chart version, remote ref or release command in the tree
// that names another.
package main
