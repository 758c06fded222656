package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/views"
)

func (s *Server) home(c echo.Context) error {
	v := views.HomeView{PolicyVersion: s.cfg.Gate.Policy().Version()[:12]}
	for _, t := range s.cfg.Gate.Tools().All() {
		v.Tools = append(v.Tools, views.ToolView{Name: t.Name, Risk: string(t.Risk), Description: t.Description})
	}
	return render(c, http.StatusOK, views.Home(v))
}
