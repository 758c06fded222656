package tools

import "net/http"

// MaxRedirects is how many redirects on a backend's own origin are
// followed.
const MaxRedirects = 3

// SameOriginOnly is a client's CheckRedirect that follows a redirect only
// on the origin (scheme, host, port) the first request went to, at most
// MaxRedirects times. Anything else comes back as the redirect itself, so
// nothing a tools file adds (its headers, the signature, the body, the
// idempotency key) ever reaches another host.
func SameOriginOnly(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if len(via) > MaxRedirects || req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}
