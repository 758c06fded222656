package web

import (
	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/static"
)

// Route names.
const (
	RouteHealth = "healthz"
	RouteHome   = "home"
)

func (s *Server) routes() {
	e := s.echo
	e.GET("/healthz", s.healthz).Name = RouteHealth
	e.GET("/", s.home).Name = RouteHome
	e.StaticFS("/static", static.Files)

	e.GET("/login", s.loginPage)
	e.POST("/login", s.login)
	e.POST("/logout", s.logout, s.checkCSRF)

	// Route-level middleware, not groups: a group on "" would also catch
	// every unknown path.
	staff := []echo.MiddlewareFunc{s.requireRole(mayRead), s.checkCSRF}
	deciders := []echo.MiddlewareFunc{s.requireRole(mayDecide), s.checkCSRF}
	admins := []echo.MiddlewareFunc{s.requireRole(mayAdmin), s.checkCSRF}

	e.GET("/queue", s.queuePage, staff...)
	e.GET("/queue/events", s.queueEvents, append(staff, s.limitStreams)...)
	e.GET("/actions/:id", s.actionPage, staff...)
	e.GET("/actions/:id/events", s.actionEvents, append(staff, s.limitStreams)...)
	e.GET("/runs", s.runsPage, staff...)
	e.GET("/runs/:id", s.runPage, staff...)
	e.GET("/audit", s.auditPage, staff...)
	e.GET("/audit/chain.jsonl", s.auditChainExport, staff...)
	e.GET("/audit/export.:format", s.auditExport, staff...)
	e.GET("/policy", s.policyPage, staff...)
	e.GET("/tools", s.toolsPage, staff...)

	e.POST("/actions/:id/approve", s.actionApprove, deciders...)
	e.POST("/actions/:id/reject", s.actionReject, deciders...)
	e.POST("/actions/:id/reconcile", s.actionReconcile, deciders...) // the gate asks for a supervisor
	e.POST("/runs/:id/retry", s.runRetry, deciders...)
	e.POST("/runs/:id/close", s.runClose, deciders...)

	e.GET("/staff", s.staffPage, admins...)
	e.POST("/staff", s.staffAdd, admins...)
	e.POST("/staff/:id/role", s.staffRole, admins...)
	e.POST("/staff/:id/disabled", s.staffDisabled, admins...)
	e.POST("/staff/:id/tokens/revoke", s.staffRevokeTokens, admins...)

	e.GET("/widget.js", s.widgetJS)
	e.GET("/demo", s.demoPage)
	e.GET("/chat", s.chatPage, s.chatHeaders)
	e.GET("/chat/events", s.chatEvents, s.chatHeaders, s.limitStreams)
	e.POST("/chat/messages", s.chatMessage, s.chatHeaders)
	e.POST("/chat/identity", s.chatIdentity, s.chatHeaders)

	api := e.Group("/api/v1")
	actions := api.Group("/actions", s.requireStaffToken)
	actions.GET("", s.apiActions)
	actions.GET("/:id", s.apiAction)
	actions.POST("/:id/approve", s.apiApprove, s.apiRequireRole(mayDecide))
	actions.POST("/:id/reject", s.apiReject, s.apiRequireRole(mayDecide))
	api.POST("/runs", s.runCreate)
	run := api.Group("/runs/:id", s.requireRunToken)
	run.GET("", s.runGet)
	run.POST("/messages", s.runMessage)
	run.GET("/events", s.runEvents, s.limitStreams)
}
