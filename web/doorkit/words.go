package doorkit

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/countersign/countersign/models/fault"
	"github.com/labstack/echo/v4"
)

// Render writes a templ component as the response.
func Render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// Sentence makes an error message read as a sentence in a banner: a capital
// first letter and a full stop. Messages are written in lower case so that
// they can also follow "could not …" in logs and the API.
func Sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return msg
	}
	r, n := utf8.DecodeRuneInString(msg)
	msg = string(unicode.ToUpper(r)) + msg[n:]
	if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "?") && !strings.HasSuffix(msg, "!") {
		msg += "."
	}
	return msg
}

// HTTPStatus is the HTTP status of a fault code.
func HTTPStatus(c fault.Code) int {
	switch c {
	case fault.Invalid:
		return http.StatusBadRequest
	case fault.NotFound:
		return http.StatusNotFound
	case fault.Conflict:
		return http.StatusConflict
	case fault.Forbidden:
		return http.StatusForbidden
	case fault.Unauthorized:
		return http.StatusUnauthorized
	case fault.RateLimited:
		return http.StatusTooManyRequests
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
