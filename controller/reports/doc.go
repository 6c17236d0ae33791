// Package reports owns the JobSet controller's side of the agents' direct
// reports: the endpoint the leader serves them on, and the store that holds
// them (docs/explanation/agent-reports.md).
//
//	server.go     Server: PUT and GET /v1alpha1/reports over TLS 1.3, the
//	              token verified, the Pod and its JobSet checked in the
//	              cache, the epochs never broadcast refused,
//	              inplace_agent_reports_total
//	broadcast.go  GET /v1alpha1/broadcast: the JobSet's broadcast streamed
//	              from the cache to agents started again in a Pod restarted
//	              in place, inplace_agent_broadcast_streams
//	store.go      Store: the reports by Pod UID; Overlay, a Pod read with
//	              its report merged into its annotations (the higher value
//	              wins)
//	token/        the projected service-account tokens, verified locally
//
// A report is soft state. The store lives in the leader's memory and goes
// with its term; the durable part of the epoch protocol is the JobSet's
// status, which the controller writes. Each term has its own CA, made in
// memory, and its own session, both written into every broadcast: a new
// leader's session makes every agent say its state again.
//
//	agent ──PUT report──▶ Server ──▶ Store.Put ──▶ OnChange: the Pod recorded
//	                        │                      again, its JobSet enqueued
//	                        └─ reads Pods, JobSets and broadcasts from the
//	                           manager's cache, never from the API server
//
// The controller reads every Pod through Overlay, so a group whose agents
// report some directly and some on their Pods is one group, and nothing
// else in the controller tells a reported epoch from an annotated one.
//
// Imports: of the module, only the APIs (api/jobset/v1alpha2,
// api/protocol), reports/token, and webhook/certs for the term's CA (a
// helper of the standard library alone); beside them the Kubernetes API
// types and controller-runtime's client. It never imports the rest of the
// controller, the agent, the webhook (except webhook/certs), the policy
// engine, OPA or cmd: the endpoint judges a report by what the
// controller's cache holds, and the controller reads the store, never the
// other way round.
package reports
