// Package certs makes a private CA and certificates signed by it, for the
// local cluster and for webhooks served without cert-manager.
//
// Imports: the standard library only.
package certs
