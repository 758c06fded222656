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
}
