package backoffice

import (
	"github.com/countersign/countersign/views"
	"github.com/labstack/echo/v4"
)

// Mount adds the back office's routes to e, each with its path from
// views/paths.go, where pages and handlers reverse them, and the role it
// needs.
func (s *Office) Mount(e *echo.Echo) {
	e.GET(views.PathHealth, s.healthz)
	e.GET(views.PathReady, s.readyz)
	e.GET(views.PathHome, s.home)

	e.GET(views.PathLogin, s.loginPage)
	e.POST(views.PathLogin, s.login)
	e.POST(views.PathLogout, s.logout, s.checkCSRF)
	if s.sso != nil {
		e.GET(views.PathLoginOIDC, s.ssoStart)
		e.GET(views.PathLoginOIDCCallback, s.ssoCallback)
	}

	// Route-level middleware, not groups: a group on "" would also catch
	// every unknown path.
	staff := []echo.MiddlewareFunc{s.requireRole(mayRead), s.checkCSRF}
	deciders := []echo.MiddlewareFunc{s.requireRole(mayDecide), s.checkCSRF}
	supervisors := []echo.MiddlewareFunc{s.requireRole(maySupervise), s.checkCSRF}
	admins := []echo.MiddlewareFunc{s.requireRole(mayAdmin), s.checkCSRF}

	e.GET(views.PathQueue, s.queuePage, staff...)
	e.GET(views.PathQueueEvent, s.queueEvents, append(staff, s.kit.LimitStreams)...)
	e.GET(views.PathAction, s.actionPage, staff...)
	e.GET(views.PathActionEvents, s.actionEvents, append(staff, s.kit.LimitStreams)...)
	e.GET(views.PathRuns, s.runsPage, staff...)
	e.GET(views.PathRun, s.runPage, staff...)
	e.GET(views.PathAudit, s.auditPage, staff...)
	e.GET(views.PathAuditChainStatus, s.auditChainStatus, staff...)
	// Exports a script fetches: a session or a staff API token.
	e.GET(views.PathAuditChain, s.auditChainExport, s.sessionOrToken(mayRead))
	e.GET(views.PathAuditExport, s.auditExport, s.sessionOrToken(mayRead))
	e.GET(views.PathPolicy, s.policyPage, staff...)
	e.GET(views.PathTools, s.toolsPage, staff...)
	e.POST(views.PathToolAccept, s.toolAccept, admins...)

	e.POST(views.PathActionApprove, s.actionApprove, deciders...)
	e.POST(views.PathActionReject, s.actionReject, deciders...)
	e.POST(views.PathActionReconcile, s.actionReconcile, deciders...) // the gate asks for a supervisor
	e.POST(views.PathRunRetry, s.runRetry, deciders...)
	e.POST(views.PathRunClose, s.runClose, deciders...)

	e.POST(views.PathGrantRevoke, s.grantRevoke, supervisors...)
	e.POST(views.PathPolicyReplay, s.policyReplay, admins...)
	e.POST(views.PathPolicyVersions, s.policyPropose, append(admins, s.versionsKept)...)
	e.GET(views.PathPolicyVersion, s.policyVersionPage, staff...)
	e.POST(views.PathPolicyVersionApprove, s.policyVersionDecide(true), append(admins, s.versionsKept)...)
	e.POST(views.PathPolicyVersionReject, s.policyVersionDecide(false), append(admins, s.versionsKept)...)
	e.GET(views.PathPolicyDiff, s.policyDiff, staff...)
	e.GET(views.PathInsights, s.insightsPage, s.requireRole(mayInsight), s.checkCSRF)
	e.POST(views.PathSuggestionAdopt, s.suggestionAdopt, append(admins, s.versionsKept)...)
	e.GET(views.PathStaff, s.staffPage, admins...)
	e.POST(views.PathStaff, s.staffAdd, admins...)
	e.POST(views.PathStaffRole, s.staffRole, admins...)
	e.POST(views.PathStaffDisabled, s.staffDisabled, admins...)
	e.POST(views.PathStaffRevokeTokens, s.staffRevokeTokens, admins...)
	e.POST(views.PathStaffLink, s.staffLink, admins...)
	e.POST(views.PathStaffReset, s.staffReset, admins...)
	e.POST(views.PathStaffGroups, s.staffGroups, admins...)
	e.POST(views.PathAgentLimits, s.agentLimits, admins...)
	e.POST(views.PathStaffChangeApprove, s.staffChangeDecide(true), admins...)
	e.POST(views.PathStaffChangeReject, s.staffChangeDecide(false), admins...)
	e.GET(views.PathPerson, s.personPage, staff...)
	e.GET(views.PathAccount, s.accountPage, staff...)
	e.POST(views.PathAccountPasskeyBegin, s.passkeyRegisterBegin, staff...)
	e.POST(views.PathAccountPasskeys, s.passkeyRegister, staff...)
	e.POST(views.PathAccountPasskeyRemove, s.passkeyRemove, staff...)
	e.POST(views.PathLoginPasskeyBegin, s.loginPasskeyBegin)
	e.POST(views.PathLoginPasskey, s.loginPasskey)
	e.POST(views.PathActionPasskey, s.beginSigning(s.actionDecision), deciders...)
	e.POST(views.PathStaffChangePasskey, s.beginSigning(s.changeDecision), admins...)
	e.POST(views.PathPolicyVersionPasskey, s.beginSigning(s.versionDecision), append(admins, s.versionsKept)...)
	e.GET(views.PathEnroll, s.enrollPage)
	e.POST(views.PathEnroll, s.enroll)
	e.POST(views.PathEnrollPasskeyBegin, s.enrollPasskeyBegin)
	e.POST(views.PathEnrollPasskey, s.enrollPasskey)

	e.GET(views.PathAPIActions, s.apiActions, s.requireStaffToken)
	e.GET(views.PathAPIAction, s.apiAction, s.requireStaffToken)
	e.POST(views.PathAPIActionApprove, s.apiApprove, s.requireStaffToken, s.apiRequireRole(mayDecide))
	e.POST(views.PathAPIActionReject, s.apiReject, s.requireStaffToken, s.apiRequireRole(mayDecide))
	e.GET(views.PathAPIGrants, s.apiGrants, s.requireStaffToken)
	e.POST(views.PathAPIGrantRevoke, s.apiGrantRevoke, s.requireStaffToken) // the gate asks for a supervisor
	e.GET(views.PathAPIPolicyVersions, s.apiVersions, s.requireStaffToken)
	e.POST(views.PathAPIPolicyVersions, s.apiProposeVersion, s.requireStaffToken) // versions asks for an admin
	e.GET(views.PathAPIPolicyVersion, s.apiVersion, s.requireStaffToken)
	e.POST(views.PathAPIPolicyVersionApprove, s.apiApproveVersion, s.requireStaffToken)
	e.POST(views.PathAPIPolicyVersionReject, s.apiRejectVersion, s.requireStaffToken)
	e.GET(views.PathAPIInsights, s.apiInsights, s.requireStaffToken)
	e.GET(views.PathAPIStaffChanges, s.apiStaffChanges, s.requireStaffToken)
	e.POST(views.PathAPIStaffChanges, s.apiStaffChangePropose, s.requireStaffToken)            // accounts asks for an admin
	e.POST(views.PathAPIStaffChangeApprove, s.apiStaffChangeDecide(true), s.requireStaffToken) // and not the proposer
	e.POST(views.PathAPIStaffChangeReject, s.apiStaffChangeDecide(false), s.requireStaffToken)
	// The consent of OAuth for /mcp is the back office's, an admin's.
	e.GET(views.PathOAuthConsent, s.oauthConsentPage, admins...)
	e.POST(views.PathOAuthConsent, s.oauthConsent, admins...)
	e.POST(views.PathOAuthClientRevoke, s.oauthClientRevoke, admins...)
	e.GET(views.PathAPICallReceipt, s.apiReceipt, s.requireCallReader)
	e.GET(views.PathAPICallEvidence, s.apiEvidence, s.requireCallReader)
	e.GET(views.PathAPIReceiptKeys, s.receiptKeys) // public keys, for anyone
	e.GET(views.PathCallReceipt, s.callReceipt, staff...)
	e.GET(views.PathCallEvidence, s.callEvidence, staff...)
}
