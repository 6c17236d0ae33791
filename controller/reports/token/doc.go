// Package token verifies the service-account tokens the in-place restart
// agents present with their reports: projected tokens, bound to the
// agent's Pod and to the reports' audience, checked locally against the
// public keys of the cluster's service-account issuer, so that a report
// costs the API server no TokenReview.
//
//	verifier.go   Verify: signature, issuer, audience, expiry, then the Pod binding of the kubernetes.io claim
//	discovery.go  NewVerifier: the issuer from the API server's OIDC discovery document, the key set read through the API server
//	keyfetch.go   at most one key-set fetch per interval, however many unknown key ids tokens name
//	verified.go   tokens that passed, remembered until they expire (an hour at most) while their key is published
//
// What local verification cannot see: whether the Pod still exists. The
// API server's own authenticator looks the bound Pod up, and refuses a
// token once its Pod is gone or replaced; a signature cannot say that.
// Callers compare Claims.PodUID with the Pod they know by that name, and a
// token outlives its Pod by at most its remaining validity (an hour, for
// the tokens the kubelet projects and rotates).
//
// The key set is read from the API server's /openid/v1/jwks, with the
// manager's own credentials, never from the jwks_uri the discovery
// document names: that is the issuer's public address, which the manager
// may have no route to (or only through a proxy the cluster does not
// trust), while the API server it already talks to serves the same keys.
//
// Imports: go-oidc and go-jose for the JOSE work, client-go's rest for the
// API server's transport; no other package of the module.
package token

// The discovery reads of NewVerifier. Most clusters grant them to every
// service account (ClusterRoleBinding system:service-account-issuer-
// discovery), but that binding is the administrator's to remove.
// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get
