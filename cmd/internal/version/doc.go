// Package version is what every inplace binary says of its build: the
// release it was built as and the commit. Builds stamp them with
//
//	-ldflags "-X github.com/inplace-dev/inplace/cmd/internal/version.version=v0.9.0
//	          -X github.com/inplace-dev/inplace/cmd/internal/version.commit=<sha>"
//
// (make build, the Dockerfile, the images of test/images); an unstamped
// build says v0.0.0-dev and the commit Go recorded, if any.
//
// It owns nothing else, and imports the standard library only: every
// binary links it.
package version
