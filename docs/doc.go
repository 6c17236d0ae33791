// Package docs holds inplace's documentation. Its test keeps reference.md
// complete: every metric, configuration field, reserved key, flag and agent
// environment variable of the code is named there.
package docs
