package web

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/doorkit"
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

type runJSON struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	CustomerID string     `json:"customer_id"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Turns      []turnJSON `json:"turns"`
}

type turnJSON struct {
	Seq       int64      `json:"seq"`
	Role      string     `json:"role"`
	Text      string     `json:"text"`
	CreatedAt time.Time  `json:"created_at"`
	ToolCalls []callJSON `json:"tool_calls"`
}

type callJSON struct {
	ID       string          `json:"id"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	Status   string          `json:"status"`
	Decision *decisionJSON   `json:"decision"`
	// Receipt is the call's signed receipt (a JWS) once it is final and
	// signed: the run keeps, with each tool call, the proof of how it ended.
	Receipt string `json:"receipt,omitempty"`
}

// decisionJSON is what the policy decided of a call.
type decisionJSON = doorkit.DecisionJSON

// argsJSON shows the normalized arguments, or what the model sent when it
// was not valid JSON (as a string).
func argsJSON(c *models.ToolCall) json.RawMessage { return doorkit.ArgsJSON(c) }

func toCallJSON(c *models.ToolCall) callJSON {
	out := callJSON{ID: c.ID, Tool: c.Tool, Args: argsJSON(c), Status: string(c.Status)}
	if c.Decision != "" {
		out.Decision = &decisionJSON{Verdict: c.Decision, Rule: c.Rule, Reason: c.Reason, PolicyVersion: c.PolicyVersion}
	}
	return out
}

func toTurnJSON(t *models.Turn, calls []models.ToolCall) turnJSON {
	out := turnJSON{Seq: t.Seq, Role: t.Role, Text: t.Text, CreatedAt: t.CreatedAt, ToolCalls: []callJSON{}}
	for i := range calls {
		if calls[i].TurnID == t.ID && t.Role == models.RoleAssistant {
			out.ToolCalls = append(out.ToolCalls, toCallJSON(&calls[i]))
		}
	}
	return out
}

func toRunJSON(r *models.Run, turns []models.Turn, calls []models.ToolCall, receipts map[string]string) runJSON {
	out := runJSON{ID: r.ID, Status: string(r.Status), CustomerID: r.CustomerID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Turns: []turnJSON{}}
	for i := range turns {
		t := toTurnJSON(&turns[i], calls)
		for j := range t.ToolCalls {
			t.ToolCalls[j].Receipt = receipts[t.ToolCalls[j].ID]
		}
		out.Turns = append(out.Turns, t)
	}
	return out
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
