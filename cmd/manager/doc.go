// Command inplace-manager runs the JobSet controller (and, in later
// releases, the admission webhooks) of inplace.
//
// It only parses flags, loads the configuration and calls package app, which
// the tests call too.
package main
