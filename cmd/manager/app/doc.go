// Package app assembles inplace-manager: the manager options that follow
// from the configuration file, and the registration of every controller.
// cmd/manager and the tests build the manager through the same two calls:
//
//	mgr, err := ctrl.NewManager(restConfig, app.Options(cfg, scheme))
//	err = app.Setup(mgr, cfg, metrics.Registry)
//
// Imports: every part of the manager (controller, webhook, policies and
// policies/reconciler) and controller-runtime; never the agent.
package app
