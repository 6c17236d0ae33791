package builtin

import "embed"

// FS holds every policy and test file of this directory.
//
//go:embed *.rego
var FS embed.FS
