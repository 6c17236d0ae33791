// Command inplace-testworker is the worker of the real-node tests and the
// demo, and the pause process of the local nodes' sandboxes:
//
//	inplace-testworker run     logs what its barrier answered (BARRIER_URL, by default
//	                           the injected agent's), then runs until told
//	inplace-testworker exit C  makes the running worker of its container exit with C
//	inplace-testworker ready   a readiness probe: ready READY_AFTER_SECONDS after start
//	inplace-testworker unready makes the readiness probe fail from then on
//	inplace-testworker pause   sleeps until SIGTERM
//
// A person or a test drives a failure on a real node with
//
//	kubectl exec POD -c CONTAINER -- /inplace-testworker exit 1
//
// Test code: no package outside test/ may import it.
package main
