package web

// Route names.
const (
	RouteHealth = "healthz"
)

func (s *Server) routes() {
	s.echo.GET("/healthz", s.healthz).Name = RouteHealth
}
