package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The cluster's DNS, as every real cluster has one: CoreDNS's kubernetes
// plugin answers for the cluster domain, so that a Pod resolves a
// headless Service's Pods by name (<hostname>.<subdomain>, what JobSet's
// workers and PyTorch's rendezvous use). It listens on the bridge's
// address, which every Pod reaches without kube-proxy, and the kubelets'
// clusterDNS points there.
const (
	clusterDomain = "cluster.local"
	dnsIP         = nodeIP
	corednsName   = "coredns"
)

// startDNS starts CoreDNS on the nodes' bridge and waits until it answers
// for the kubernetes Service. It runs with the admin kubeconfig, as the
// controller manager and the scheduler of this cluster do.
func (c *Cluster) startDNS(ctx context.Context) error {
	dir := filepath.Join(c.workDir, corednsName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	corefile := filepath.Join(dir, "Corefile")
	// No cache: a Pod recreated with a new address must resolve to it at
	// once, as the kubernetes plugin's own records do.
	if err := os.WriteFile(corefile, fmt.Appendf(nil, `%[1]s:53 {
    bind %[2]s
    errors
    kubernetes %[1]s {
        kubeconfig %[3]s
        ttl 1
    }
}
`, clusterDomain, dnsIP, c.Kubeconfig), 0o644); err != nil {
		return err
	}
	p, err := c.start(corednsName, []string{"-conf", corefile})
	if err != nil {
		return err
	}
	resolver := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(dnsIP, "53"))
		},
	}
	name := "kubernetes.default.svc." + clusterDomain
	return p.waitFor(ctx, "an answer for "+name, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(ctx, name)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0] != serviceClusterFirstIP {
			return fmt.Errorf("%s resolves to %v, not %s", name, addrs, serviceClusterFirstIP)
		}
		return nil
	})
}
