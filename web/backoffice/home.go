package backoffice

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/views"
)

// home sends staff to their queue and shows everyone else where to go.
func (s *Office) home(c echo.Context) error {
	if currentStaff(c) != nil {
		return c.Redirect(http.StatusSeeOther, views.PathQueue)
	}
	return render(c, http.StatusOK, views.Home())
}
