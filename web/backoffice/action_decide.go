package backoffice

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/labstack/echo/v4"
)

// An action page's forms and stream: approve (as it stands or edited),
// reject, reconcile an unknown outcome, and the page following the action.

// actionApprove handles Approve and Edit-and-approve.
func (s *Office) actionApprove(c echo.Context) error {
	id := c.Param("id")
	sc := currentStaff(c)
	req := gate.ApproveRequest{Note: c.FormValue("note"), ReviewID: c.FormValue("review")}
	var fieldErrs map[string]string
	if c.FormValue("edit") == "1" {
		call, err := s.core.Store.ToolCall(c.Request().Context(), id)
		if err != nil {
			return fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
		}
		tool, ok := s.core.Gate.Tools().Get(call.Tool)
		if !ok {
			return fault.Errorf(fault.NotFound, "tool %s is no longer registered", call.Tool)
		}
		req.Args, fieldErrs = argsFromForm(tool.Schema, c.FormValue)
		if len(fieldErrs) > 0 {
			return s.actionRerender(c, id, http.StatusBadRequest, "Fix the highlighted fields.", fieldErrs, true)
		}
	}
	grant, err := grantFromForm(c.FormValue)
	if err != nil {
		return s.actionRerender(c, id, http.StatusBadRequest, fault.Message(err), nil, req.Args != nil)
	}
	req.Grant = grant
	if req.Passkey, err = s.signature(c, s.verdictOn("approve")); err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return s.actionRerender(c, id, doorkit.HTTPStatus(fault.CodeOf(err)), fault.Message(err), nil, req.Args != nil)
	}
	res, err := s.core.Gate.Approve(c.Request().Context(), id, sc.staff.Actor(), req)
	if err != nil {
		var ae *tools.ArgsError
		if errors.As(err, &ae) {
			errs := map[string]string{}
			for _, p := range ae.Problems {
				errs[strings.SplitN(p.Path, ".", 2)[0]] = staffWords(p.Message)
			}
			return s.actionRerender(c, id, http.StatusBadRequest, fault.Message(err), errs, true)
		}
		code := fault.CodeOf(err)
		if code == fault.Internal {
			return err
		}
		msg := fault.Message(err)
		if req.Passkey == nil && errors.Is(err, models.ErrPasskeyNeeded) {
			msg = "This rule asks for your passkey: use Approve with passkey (it needs a passkey on your account page, and JavaScript)"
			if req.Args != nil {
				// The edit matched a rule that asks for one: the page offers
				// it for what was typed.
				c.Set(passkeyAskedKey, true)
				msg = "The edited call falls under a rule that asks for your passkey: use Approve edited call with passkey (it needs a passkey on your account page, and JavaScript)"
			}
		}
		return s.actionRerender(c, id, doorkit.HTTPStatus(code), msg, nil, req.Args != nil)
	}
	done := "approval_added"
	if res.Final {
		done = "approved"
	}
	q := url.Values{"done": {done}}
	if res.Grant != nil {
		q.Set("grant", res.Grant.ID)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.ActionPath(id), q.Encode()))
}

// passkeyAskedKey marks a request whose edit asked for a passkey the
// action's own rule does not.
const passkeyAskedKey = "countersign.passkey-asked"

// staffWords rewrites a validation message for a person: a regular
// expression means nothing to an approver (the model is still shown it).
func staffWords(msg string) string {
	if got, _, ok := strings.Cut(msg, " does not match the pattern "); ok {
		return sentence(got + " is not in the form this field takes (see the hint under it)")
	}
	return sentence(msg)
}

func (s *Office) actionReject(c echo.Context) error {
	id := c.Param("id")
	sc := currentStaff(c)
	sig, err := s.signature(c, s.verdictOn("reject"))
	if err == nil {
		err = s.core.Gate.RejectSigned(c.Request().Context(), id, sc.staff.Actor(), c.FormValue("reason"), c.FormValue("review"), sig)
	}
	if err != nil {
		code := fault.CodeOf(err)
		if code == fault.Internal {
			return err
		}
		v, _, verr := s.actionView(c, id)
		if verr != nil {
			return verr
		}
		v.FlashError, v.RejectReason = sentence(fault.Message(err)), c.FormValue("reason")
		return render(c, doorkit.HTTPStatus(code), views.Action(v))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.ActionPath(id), "done=rejected"))
}

func (s *Office) actionRerender(c echo.Context, id string, status int, msg string, fieldErrs map[string]string, editOpen bool) error {
	v, call, err := s.actionView(c, id)
	if err != nil {
		return err
	}
	v.FlashError, v.EditOpen = sentence(msg), editOpen
	if asked, _ := c.Get(passkeyAskedKey).(bool); asked {
		v.Passkey = true
	}
	keepGrantTyped(c, v.GrantOffer)
	if editOpen && status == http.StatusBadRequest && len(fieldErrs) == 0 {
		v.EditError = sentence(msg)
	}
	if tool, ok := s.core.Gate.Tools().Get(call.Tool); ok && editOpen {
		// Keep what the person typed.
		typed := map[string]any{}
		for _, f := range v.Fields {
			if val := c.FormValue("arg." + f.Name); val != "" {
				typed[f.Name] = val
			}
		}
		v.Fields = editFields(tool.Schema, mustJSON(typed), fieldErrs)
	}
	return render(c, status, views.Action(v))
}

// actionEvents tells an open action page when its action changes, so that
// nobody decides twice from a stale page.
func (s *Office) actionEvents(c echo.Context) error {
	id := c.Param("id")
	ch, stop := s.changes.queue.SubscribeAction(id)
	defer stop()
	w := doorkit.StartSSE(c)
	ctx := c.Request().Context()
	send := func(struct{}) bool {
		call, err := s.core.Store.ToolCall(ctx, id)
		if err != nil {
			return false
		}
		approvals, disabled, err := s.approvals(c, id)
		if err != nil {
			return false
		}
		pending := call.Status == models.CallPending
		events := []ssePart{{"status", views.ActionStatus(id, string(call.Status), pending, actionNews(call, approvals))}}
		if pending {
			have := 0
			for _, a := range approvals {
				if gate.Counts(a, call.ArgsHash, disabled) {
					have++
				}
			}
			events = append(events, ssePart{"progress", views.ActionProgress(have, call.RequiredApprovals, string(call.RequiredRole))})
		}
		for _, e := range events {
			var b bytes.Buffer
			if err := e.part.Render(ctx, &b); err != nil {
				return false
			}
			if _, err := w.Write(doorkit.SSEData(e.name, b.Bytes())); err != nil {
				return false
			}
		}
		w.Flush()
		return true
	}
	// The status as it is now, first: a change made between the page's
	// render and this subscription would otherwise never reach the page.
	if send(struct{}{}) {
		doorkit.Follow(ctx, w, ch, send)
	}
	return nil
}

// actionReconcile records what a supervisor found out about a call whose
// outcome is unknown.
func (s *Office) actionReconcile(c echo.Context) error {
	id := c.Param("id")
	err := s.core.Gate.Reconcile(c.Request().Context(), id, currentStaff(c).staff.Actor(), c.FormValue("happened") == "true", c.FormValue("note"))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.ActionPath(id), "done=reconciled"))
}
