// Command kubectl-inplace is inplacectl as a kubectl plugin: on PATH, it
// runs as `kubectl inplace ...`, with the same subcommands and flags, and
// usage lines that read `kubectl inplace`. Under the name
// kubectl_complete-inplace (a link or a copy) it is the executable kubectl
// runs to complete `kubectl inplace <TAB>`.
//
// It only calls package app, as cmd/inplacectl does.
package main
