package views

import "context"

// RequestInfo is what every page needs about the request: who is signed in
// and the CSRF token their forms must carry. Handlers put it on the
// request's context; components read it with Current.
type RequestInfo struct {
	StaffName string
	StaffRole string
	CSRF      string
	Path      string
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

// CanDecide reports whether the signed-in role may approve or reject.
func (r RequestInfo) CanDecide() bool {
	return r.StaffRole == "approver" || r.StaffRole == "supervisor" || r.StaffRole == "admin"
}

// IsAdmin reports whether the signed-in role is admin.
func (r RequestInfo) IsAdmin() bool { return r.StaffRole == "admin" }

func navClass(current, prefix string) string {
	if len(current) >= len(prefix) && current[:len(prefix)] == prefix {
		return "active"
	}
	return ""
}
