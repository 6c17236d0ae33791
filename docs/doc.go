// Package docs holds inplace's documentation, indexed by README.md. Its
// tests keep the reference complete (every metric, configuration field,
// reserved key, flag, agent environment variable, condition and reason of
// the code is named on its page of reference/), the RBAC tables of
// explanation/security.md holding every right of the Roles that config/
// installs and the controller writes, and no other, the package layout
// that explanation/design.md describes, the index listing every page,
// every relative link of the README, the changelog, the docs, the examples
// and the chart resolving to a file and, with an anchor, to one of its
// headings, and every measured duration or ratio of the README and the
// docs (development/ aside) linked to the benchmark table it comes from.
//
// It imports nothing of the module: its test reads the sources as files.
package docs
