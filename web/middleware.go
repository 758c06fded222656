package web

import (
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// logRequests writes one structured line per request, with its request id.
// Paths are logged without their query strings, and never a header: tokens
// stay out of the logs.
func logRequests(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelError
			case status >= 400:
				level = slog.LevelWarn
			}
			path := c.Request().URL.Path
			if strings.HasPrefix(c.Path(), "/enroll/") {
				path = strings.Replace(c.Path(), ":token", "(link)", 1) // the path holds the link's secret
			}
			log.Log(c.Request().Context(), level, "request",
				"request_id", c.Response().Header().Get(echo.HeaderXRequestID),
				"method", c.Request().Method, "path", path, "route", c.Path(),
				"status", status, "duration_ms", time.Since(start).Milliseconds(), "bytes", c.Response().Size)
			return nil
		}
	}
}
