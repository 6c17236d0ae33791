// Command push pushes a release's images, which make release writes into
// dist/ as OCI archives, to an OCI registry: make push REGISTRY=... .
//
// Each image keeps the digest dist/images.txt names, all its platforms
// included, so that a manifest pinned by digest finds it. Credentials are
// the Docker configuration's (~/.docker/config.json, $DOCKER_CONFIG), as
// docker login and crane auth login write them; docs/how-to/release.md
// says when to push.
//
// It is a tool of the repository, not of the product: it reads the
// archives with test/images, which writes them, and imports nothing of
// the product.
package main
