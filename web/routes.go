package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/static"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/chat"
	"github.com/countersign/countersign/web/gateapi"
	"github.com/countersign/countersign/web/mcpgate"
)

// routes registers every route: the back office's (backoffice.Office.Mount,
// each with its role), the static files, the API's description, each
// channel's inbound route, and the doors.
func (s *Server) routes() {
	e := s.echo
	s.office.Mount(e)
	e.StaticFS(views.PathStatic, static.Files)
	// Browsers ask for it on every page: no icon, and no warning in the log.
	e.GET("/favicon.ico", func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=86400")
		return c.NoContent(http.StatusNoContent)
	})
	e.GET(views.PathAPIOpenAPI, s.openAPI)
	// Each channel people answer through (Slack's buttons) has a route of
	// its own, checked by its service's signature instead of a session.
	for _, r := range s.core.Outbox.Routes() {
		e.POST(r.Path, echo.WrapHandler(r.Handler))
	}
	s.doors()
}

// doors mounts the doors people and agents come in by, each a package of
// its own over the core and the doors' kit (web/doorkit): the customers'
// (the widget, the chat frame, the runs API), MCP's (with OAuth's tokens,
// web/oauth, mounted before the back office, which holds its consent) and
// the gate API. A new door is a package and one line here.
func (s *Server) doors() {
	e := s.echo
	chat.Mount(e, s.kit, chat.Options{Customers: s.cfg.Customers, WidgetOrigins: s.cfg.WidgetOrigins, DemoSecret: s.cfg.DemoSecret,
		DemoCustomers: s.cfg.DemoCustomers, ReplyWait: s.cfg.ReplyWait, ChatGrantSeed: s.cfg.ChatGrantSeed})
	mcpgate.Mount(e, s.kit, mcpgate.Options{Wait: s.cfg.MCPWait, QuestionTTL: s.cfg.MCPQuestionTTL, MaxSessionsPerAgent: s.cfg.MaxMCPSessionsPerAgent,
		SessionIdle: s.cfg.MCPSessionIdle, Origins: s.cfg.MCPOrigins, Receipt: s.office.ReceiptJWS})
	gateapi.Mount(e, s.kit)
}
