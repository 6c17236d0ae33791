// Package report writes what the policy audit found into wg-policy
// PolicyReports (wgpolicyk8s.io/v1alpha2), one per namespace, so that the
// tools that read Kyverno's and Gatekeeper's reports (Policy Reporter, its
// UI, kubectl get polr) show the JobSetPolicies' verdicts beside theirs.
//
// One audit goes through three steps:
//
//	Auditor ──FromDecision──▶ Results ──Writer.Write──▶ PolicyReports
//	(each JobSet's decision)  (bounded, by namespace)  (only those that changed)
//
// FromDecision and Results are pure: they say what each policy concluded
// of each JobSet and keep, per namespace, the counts and the most severe
// results. build (build.go), pure too, turns them into a report's content,
// keeping the timestamp of every result the stored report already holds.
// Writer is the I/O: it lists the reports it wrote, creates, updates and
// deletes them, and writes nothing while the CRD is absent.
//
// Imports: the policy engine (for its Decision), the APIs and
// controller-runtime. It never imports the JobSet controller, the webhook
// or the agent.
package report
