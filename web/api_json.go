package web

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models/fault"
)

// decodeJSON reads a request body strictly: JSON only, no unknown fields,
// one object, within the body limit. Its errors say what to fix.
func decodeJSON(c echo.Context, v any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return &echo.HTTPError{Code: http.StatusUnsupportedMediaType, Message: "send a JSON body with Content-Type: application/json"}
	}
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var big *http.MaxBytesError
	var he *echo.HTTPError
	switch {
	case err == nil:
	case errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge && agentCall(c):
		return &echo.HTTPError{Code: http.StatusRequestEntityTooLarge, Message: tooBigForAgent()}
	case errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge:
		return &echo.HTTPError{Code: http.StatusRequestEntityTooLarge, Message: "the body is over the limit of " + BodyLimit + "B"}
	case errors.As(err, &big):
		return &echo.HTTPError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the body is over the limit of %d bytes", big.Limit)}
	case errors.As(err, &syn):
		return fault.Errorf(fault.Invalid, "the body is not valid JSON (at byte %d: %s)", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		return fault.Errorf(fault.Invalid, "field %q must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.EOF):
		return fault.Errorf(fault.Invalid, "the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fault.Errorf(fault.Invalid, "the body ends in the middle of the JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fault.Errorf(fault.Invalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return fault.Errorf(fault.Invalid, "the body could not be read: %v", err)
	}
	if dec.More() {
		return fault.Errorf(fault.Invalid, "the body holds more than one JSON value")
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64", "float64", "float32", "int32":
		return "a number"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return k
}

// openAPIDoc describes the API (runs, calls, actions) as OpenAPI 3.1; CI
// lints it, and the tests check every API answer they get against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves the API's description: GET /api/v1/openapi.json.
func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
