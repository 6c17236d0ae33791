// Package docs holds inplace's documentation. Its test keeps reference.md
// complete: every metric, configuration field, reserved key, flag and agent
// environment variable of the code is named there.
//
// It imports nothing of the module: its test reads the sources as files.
package docs
