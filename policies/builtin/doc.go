// Package builtin holds the built-in Rego policies, one file per policy with
// its tests beside it. A policy's name is its file name without ".rego"; an
// admin can disable one by that name in the manager configuration.
//
// It holds files only and imports nothing but embed.
package builtin
