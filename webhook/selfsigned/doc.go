// Package selfsigned makes the admission server's own CA and serving
// certificate, renews the certificate before it expires, and writes the CA
// into the webhook configurations: for clusters without cert-manager.
package selfsigned
