package backoffice

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/web/doorkit"
)

// receiptKeys is GET /api/v1/receipts/keys: every key that has signed
// receipts, as a JWK Set, for anyone (no credential: public keys).
func (s *Office) receiptKeys(c echo.Context) error {
	set, err := s.core.Receipts.Keys(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	c.Response().Header().Set(echo.HeaderContentType, "application/jwk-set+json")
	c.Response().WriteHeader(http.StatusOK)
	return json.NewEncoder(c.Response()).Encode(set)
}

// requireCallReader lets through a bearer that may read a call: the agent
// that made it (its agent key), or staff (an API token; any role reads).
// The handler checks the call is the agent's (callReadable).
func (s *Office) requireCallReader(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return fault.Errorf(fault.Unauthorized, "send the agent key that made the call, or a staff API token, as Authorization: Bearer <key>")
		}
		ctx := c.Request().Context()
		if ag, err := s.core.Accounts.AgentForKey(ctx, key); err == nil {
			return next(doorkit.WithAgent(c, ag))
		}
		st, err := s.core.Accounts.StaffForToken(ctx, key)
		if err != nil {
			return fault.Errorf(fault.Unauthorized, "the key is neither an agent key nor a staff API token that works")
		}
		c.SetRequest(c.Request().WithContext(context.WithValue(ctx, staffCtxKey{}, &staffCtx{staff: st})))
		return next(c)
	}
}

// readableCall is the call :id when the one asking may read it: staff, or
// the agent whose call it is (another's is 404, as on GET /api/v1/calls/:id).
func (s *Office) readableCall(c echo.Context) (*models.ToolCall, error) {
	ctx := c.Request().Context()
	id := c.Param("id")
	notFound := fault.Errorf(fault.NotFound, "call %s was not found", tools.Truncate(id, 64))
	call, err := s.core.Store.ToolCall(ctx, id)
	if err != nil {
		return nil, notFound
	}
	if ag := doorkit.Agent(c); ag != nil {
		run, err := s.core.Store.Run(ctx, call.RunID)
		if err != nil || run.AgentID != ag.ID {
			return nil, notFound
		}
	} else if sc := currentStaff(c); sc == nil || !sc.staff.Role.Valid() {
		return nil, notFound
	}
	return call, nil
}

// apiReceipt is GET /api/v1/calls/:id/receipt: the call's signed receipt
// and, for reading, its payload decoded (the JWS is what is signed).
func (s *Office) apiReceipt(c echo.Context) error {
	call, err := s.readableCall(c)
	if err != nil {
		return err
	}
	return s.sendReceipt(c, call.ID, false)
}

// sendReceipt answers with the receipt of a call; as a file to save when
// download is set (the back office's link).
func (s *Office) sendReceipt(c echo.Context, callID string, download bool) error {
	r, err := s.core.Receipts.For(c.Request().Context(), callID)
	if err != nil {
		return err
	}
	parts := strings.Split(r.JWS, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fault.Wrap(err, "the receipt could not be read")
	}
	if download {
		c.Response().Header().Set("Content-Disposition", `attachment; filename="receipt-`+callID+`.json"`)
	}
	return c.JSON(http.StatusOK, map[string]any{"receipt": r.JWS, "payload": json.RawMessage(payload)})
}

// apiEvidence is GET /api/v1/calls/:id/evidence: the call's evidence
// bundle (countersign evidence verify FILE checks it offline).
func (s *Office) apiEvidence(c echo.Context) error {
	call, err := s.readableCall(c)
	if err != nil {
		return err
	}
	return s.sendEvidence(c, call.ID)
}

func (s *Office) sendEvidence(c echo.Context, callID string) error {
	b, err := s.core.Evidence(c.Request().Context(), callID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="evidence-`+callID+`.json"`)
	return c.JSON(http.StatusOK, b)
}

// callReceipt and callEvidence are the back office's links (staff signed
// in): the same documents, as files to save.
func (s *Office) callReceipt(c echo.Context) error {
	if _, err := s.core.Store.ToolCall(c.Request().Context(), c.Param("id")); err != nil {
		return fault.Errorf(fault.NotFound, "call %s was not found", tools.Truncate(c.Param("id"), 64))
	}
	return s.sendReceipt(c, c.Param("id"), true)
}

func (s *Office) callEvidence(c echo.Context) error {
	if _, err := s.core.Store.ToolCall(c.Request().Context(), c.Param("id")); err != nil {
		return fault.Errorf(fault.NotFound, "call %s was not found", tools.Truncate(c.Param("id"), 64))
	}
	return s.sendEvidence(c, c.Param("id"))
}

// ReceiptJWS is a final call's receipt, for MCP results.
// A call that ended in this request (fresh) is signed without looking for
// a receipt first.
func (s *Office) ReceiptJWS(ctx context.Context, call *models.ToolCall, fresh bool) (string, error) {
	get := s.core.Receipts.For
	if fresh {
		get = func(ctx context.Context, _ string) (*models.Receipt, error) { return s.core.Receipts.Fresh(ctx, call) }
	}
	r, err := get(ctx, call.ID)
	if err != nil {
		return "", err
	}
	return r.JWS, nil
}
