// Package oidc is the oidc capability family of kiln (build tag
// kiln_oidc): route auth `oidc:<name>` checks an OIDC bearer token (a
// signed JWT) against a pinned JWKS — from `jwks_file` (loaded with the
// workflow) or inline `jwks_json` — so the server never fetches keys at
// run time. RS256/384/512 and ES256/384 only; `none` and HS* are refused.
// It registers the auth kind into capabilities/http from init.
package oidc
