// Package docpage reads the fenced code blocks of a Markdown page for the
// tests that run what a page documents: each block with its info string,
// its text, its line, the heading above it and the prose before it. What
// a page's blocks are to a test (a command, the output it prints, a file
// to write) is the test's own.
//
// Test code: it imports the standard library alone, and only tests import
// it.
package docpage
