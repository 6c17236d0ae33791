// Command inplace-supervisor runs a worker in process scope
// (inplace.dev/restart-scope: process). It ships in the agent's image; the
// agent container's postStart hook copies it onto the Pod's supervisor
// volume (`inplace-supervisor install DEST`), and the webhook rewrites each
// worker container's command to run it (`inplace-supervisor supervise
// [flags] -- COMMAND [ARG...]`).
//
// It is copied into every process-scope Pod at its start, so it stays a
// few megabytes: it imports agent/supervisor, api/protocol and
// cmd/internal/version, never the agent, client-go or anything else of
// Kubernetes. It speaks only to its Pod's agent, over the loopback.
package main
