// Command coredns is CoreDNS with only the plugins the local cluster's DNS
// uses: the kubernetes plugin answers for the cluster domain, as on any
// cluster. Importing the plugins one by one instead of
// github.com/coredns/coredns/core/plugin leaves out the cloud providers'
// SDKs, which would triple the cold build.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func main() {
	coremain.Run()
}
