package web

import "github.com/countersign/countersign/static"

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

	api := e.Group("/api/v1")
	api.POST("/runs", s.runCreate)
	run := api.Group("/runs/:id", s.requireRunToken)
	run.GET("", s.runGet)
	run.POST("/messages", s.runMessage)
	run.GET("/events", s.runEvents)
}
