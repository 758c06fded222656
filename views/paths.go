package views

import (
	"net/url"
	"strings"
)

// Every path of Countersign, named once. web/routes.go registers its routes
// with these patterns; handlers and pages link with the constants and the
// functions below, never by gluing strings, so a path changes in one place.
const (
	PathHome       = "/"
	PathHealth     = "/healthz"
	PathReady      = "/readyz"
	PathStatic     = "/static"
	PathLogin      = "/login"
	PathLogout     = "/logout"
	PathQueue      = "/queue"
	PathQueueEvent = "/queue/events"

	PathAction          = "/actions/:id"
	PathActionEvents    = "/actions/:id/events"
	PathActionApprove   = "/actions/:id/approve"
	PathActionReject    = "/actions/:id/reject"
	PathActionReconcile = "/actions/:id/reconcile"

	PathRuns     = "/runs"
	PathRun      = "/runs/:id"
	PathRunRetry = "/runs/:id/retry"
	PathRunClose = "/runs/:id/close"

	PathAudit      = "/audit"
	PathAuditChain = "/audit/chain.jsonl"
	// PathAuditChainStatus is the audit page's chain check, which the page
	// asks for again until the first verification has finished.
	PathAuditChainStatus = "/audit/chain-status"
	PathAuditExport      = "/audit/export.:format"
	PathPolicy           = "/policy"
	PathPolicyReplay     = "/policy/replay"
	// Policy versions: proposed on /policy, each with a page of its own
	// where admins approve or reject it; a diff between any two.
	PathPolicyVersions       = "/policy/versions"
	PathPolicyVersion        = "/policy/versions/:id"
	PathPolicyVersionApprove = "/policy/versions/:id/approve"
	PathPolicyVersionReject  = "/policy/versions/:id/reject"
	PathPolicyDiff           = "/policy/diff"
	PathInsights             = "/insights"
	PathSuggestionAdopt      = "/insights/suggestions/:id/adopt"
	PathGrantRevoke          = "/policy/grants/:id/revoke"
	PathTools                = "/tools"
	PathToolAccept           = "/tools/:name/accept"

	PathStaff              = "/staff"
	PathStaffRole          = "/staff/:id/role"
	PathStaffDisabled      = "/staff/:id/disabled"
	PathStaffRevokeTokens  = "/staff/:id/tokens/revoke"
	PathStaffLink          = "/staff/:id/links/:channel"
	PathStaffReset         = "/staff/:id/reset"
	PathStaffGroups        = "/staff/groups"
	PathAgentLimits        = "/staff/agents/:id/limits"
	PathStaffChangeApprove = "/staff/changes/:id/approve"
	PathStaffChangeReject  = "/staff/changes/:id/reject"
	// PathPerson is how an account came to be able to sign (its lineage),
	// for everyone who reads the audit.
	PathPerson = "/people/:id"
	// PathEnroll is a one-time enrollment link: its owner sets a password.
	PathEnroll             = "/enroll/:token"
	PathEnrollPasskeyBegin = "/enroll/:token/passkey/options"
	PathEnrollPasskey      = "/enroll/:token/passkey"
	// A person's own account: their passkeys.
	PathAccount              = "/account"
	PathAccountPasskeyBegin  = "/account/passkeys/options"
	PathAccountPasskeys      = "/account/passkeys"
	PathAccountPasskeyRemove = "/account/passkeys/:id/remove"
	PathLoginPasskeyBegin    = "/login/passkey/options"
	PathLoginPasskey         = "/login/passkey"
	// PathActionPasskey starts the passkey prompt of a decision.
	PathActionPasskey        = "/actions/:id/passkey"
	PathStaffChangePasskey   = "/staff/changes/:id/passkey"
	PathPolicyVersionPasskey = "/policy/versions/:id/passkey"
	// Single sign-on with the company's OpenID Provider.
	PathLoginOIDC         = "/login/oidc"
	PathLoginOIDCCallback = "/login/oidc/callback"
	// An MCP client asking for OAuth access is consented to here, by an
	// admin; an authorized client is revoked on /staff.
	PathOAuthConsent      = "/oauth/consent"
	PathOAuthClientRevoke = "/staff/oauth-clients/:id/revoke"

	PathWidget       = "/widget.js"
	PathDemo         = "/demo"
	PathChat         = "/chat"
	PathChatEvents   = "/chat/events"
	PathChatMessages = "/chat/messages"
	PathChatIdentity = "/chat/identity"

	PathAPIActions              = "/api/v1/actions"
	PathAPIAction               = "/api/v1/actions/:id"
	PathAPIActionApprove        = "/api/v1/actions/:id/approve"
	PathAPIActionReject         = "/api/v1/actions/:id/reject"
	PathAPIGrants               = "/api/v1/grants"
	PathAPIGrantRevoke          = "/api/v1/grants/:id/revoke"
	PathAPIRuns                 = "/api/v1/runs"
	PathAPIRun                  = "/api/v1/runs/:id"
	PathAPIRunMessages          = "/api/v1/runs/:id/messages"
	PathAPIRunEvents            = "/api/v1/runs/:id/events"
	PathAPIOpenAPI              = "/api/v1/openapi.json"
	PathAPIPolicyVersions       = "/api/v1/policy/versions"
	PathAPIPolicyVersion        = "/api/v1/policy/versions/:id"
	PathAPIPolicyVersionApprove = "/api/v1/policy/versions/:id/approve"
	PathAPIPolicyVersionReject  = "/api/v1/policy/versions/:id/reject"
	PathAPIStaffChanges         = "/api/v1/staff/changes"
	PathAPIStaffChangeApprove   = "/api/v1/staff/changes/:id/approve"
	PathAPIStaffChangeReject    = "/api/v1/staff/changes/:id/reject"
	PathAPIInsights             = "/api/v1/insights"
	PathMCP                     = "/mcp"
	PathAPICalls                = "/api/v1/calls"
	PathAPICall                 = "/api/v1/calls/:id"
	PathAPICallResult           = "/api/v1/calls/:id/result"
	PathAPICallReceipt          = "/api/v1/calls/:id/receipt"
	PathAPICallEvidence         = "/api/v1/calls/:id/evidence"
	PathAPIReceiptKeys          = "/api/v1/receipts/keys"
	// The back office's links to a call's receipt and evidence (staff).
	PathCallReceipt  = "/calls/:id/receipt"
	PathCallEvidence = "/calls/:id/evidence"
)

// Reverse fills a pattern's parameters (":id", ":format"), in order, each
// escaped for a path segment.
func Reverse(pattern string, params ...string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != ':' {
			b.WriteByte(pattern[i])
			continue
		}
		end := i + 1
		for end < len(pattern) && pattern[end] != '/' && pattern[end] != '.' {
			end++
		}
		if len(params) > 0 {
			b.WriteString(url.PathEscape(params[0]))
			params = params[1:]
		}
		i = end - 1
	}
	return b.String()
}

// WithQuery adds a query string (already encoded) to a path.
func WithQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

// ActionPath is an action's page.
func ActionPath(id string) string { return Reverse(PathAction, id) }

// RunPath is a run's page.
func RunPath(id string) string { return Reverse(PathRun, id) }

// olderRuns is the next page of the runs list.
func olderRuns(status, after string) string {
	q := url.Values{"after": {after}}
	if status != "" {
		q.Set("status", status)
	}
	return WithQuery(PathRuns, q.Encode())
}

// urlQueryEscape escapes a value for a query string.
func urlQueryEscape(s string) string { return url.QueryEscape(s) }
