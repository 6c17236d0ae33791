// Command sizing measures what inplace-manager's two Deployments need: the
// peak memory and the CPU of the JobSet controller and of the admission
// server, each its own process of the released binary, by JobSets, Pods
// and admin policies, on the local cluster with simulated nodes. Its
// table is the sizing table of docs/how-to/install.md, and the chart's
// requests and limits fit its middle row.
//
// A benchmark: it may import any package of the module; nothing imports
// it.
package main
