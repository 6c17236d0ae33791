// Command inplace-manager runs the JobSet controller, the admission
// webhooks and the JobSetPolicy reconciler of inplace.
//
// It only parses flags, loads the configuration and calls package app, which
// the tests call too.
package main
