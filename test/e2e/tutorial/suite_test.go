package tutorial

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "docs/tutorials/first-in-place-jobset.md, run as written")
}
