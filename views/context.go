package views

import "context"

// RequestInfo is what every page needs about the request: who is signed in,
// what their role lets them do, and the CSRF token their forms must carry.
// Handlers put it on the request's context; components read it with Current.
type RequestInfo struct {
	StaffName string
	StaffRole string
	CSRF      string
	Path      string
	// What the role may do, as the web layer decided it. CanSupervise:
	// reconcile calls, give and revoke standing grants.
	CanDecide, CanSupervise, IsAdmin bool
	// InstancesDiffer, shown to admins on every page, says that live
	// instances decide with different policies or tools.
	InstancesDiffer string
}

type requestInfoKey struct{}

// WithRequestInfo returns a context carrying info.
func WithRequestInfo(ctx context.Context, info RequestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}

// Current returns the request's info (zero when nobody is signed in).
func Current(ctx context.Context) RequestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(RequestInfo)
	return info
}

func navClass(current, prefix string) string {
	if len(current) >= len(prefix) && current[:len(prefix)] == prefix {
		return "active"
	}
	return ""
}
