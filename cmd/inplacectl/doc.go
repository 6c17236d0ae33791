// Command inplacectl renders JobSets as the webhooks would store them and
// evaluates and tests policies, offline; `inplacectl status` reads a
// JobSet's in-place restart state from a cluster. cmd/kubectl-inplace is
// the same program as a kubectl plugin.
//
// It only calls package app, which tests call too.
package main
