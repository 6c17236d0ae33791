// Package crd holds the CustomResourceDefinitions the project ships, for
// the programs that apply them offline as the API server would. It imports
// the standard library only.
package crd
