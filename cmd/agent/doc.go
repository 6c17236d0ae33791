// Command inplace-agent is the sidecar of InPlaceRestart JobSets: it reports
// its Pod's epoch, holds the workers behind its barrier and restarts the Pod
// in place when its epoch is deprecated. The mutating webhook injects it
// with the environment it reads.
//
// It only reads its environment and flags and calls package agent.
package main
