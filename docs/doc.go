// Package docs holds inplace's documentation. Its tests keep the reference
// complete (every metric, configuration field, reserved key, flag, agent
// environment variable, condition and reason of the code is named on its
// page of reference/) and the package layout that explanation/design.md
// describes.
//
// It imports nothing of the module: its test reads the sources as files.
package docs
