package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/slack-go/slack"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models/fault"
)

// slackInteraction is POST /integrations/slack/interactions: a click on
// a message's Approve or Reject. Slack signs the request with the app's
// signing secret (v0: HMAC-SHA256 over "v0:<timestamp>:<body>", refused
// when the timestamp is more than five minutes off); the click acts as the
// staff account linked to the Slack user, with the same checks as the back
// office (role, the approvals needed, expiry). The request is answered at
// once, as Slack wants within three seconds; the outcome reaches the person
// through the interaction's response_url: the message replaced with where
// the action stands, or a note only they see when nothing changed.
func (s *Server) slackInteraction(c echo.Context) error {
	if s.cfg.SlackSigningSecret == "" || s.core.Outbox == nil {
		return fault.Errorf(fault.NotFound, "Slack is not set up here")
	}
	r := c.Request()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err != nil || len(body) > 64<<10 {
		return fault.Errorf(fault.Invalid, "the request body is too large")
	}
	sv, err := slack.NewSecretsVerifier(r.Header, s.cfg.SlackSigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		s.cfg.Log.Warn("refused a Slack interaction", "err", err, "remote", c.RealIP())
		return fault.Errorf(fault.Unauthorized, "the Slack signature does not verify")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return fault.Errorf(fault.Invalid, "the interaction does not parse")
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		return fault.Errorf(fault.Invalid, "the interaction does not parse")
	}
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return c.NoContent(http.StatusOK) // not a click we act on
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.ActionID != outbox.SlackApprove && act.ActionID != outbox.SlackReject {
		return c.NoContent(http.StatusOK) // Open: a link, nothing to do
	}
	reason := ""
	if cb.BlockActionState != nil {
		reason = cb.BlockActionState.Values[outbox.SlackReasonBlock][outbox.SlackReasonInput].Value
	}
	// Slack wants its answer within 3 seconds; deciding may take longer
	// (an approval runs the call): one of the core's workers takes it.
	select {
	case s.slackClicks <- slackClick{cb.User.ID, act.ActionID, act.Value, reason, cb.ResponseURL}:
		return c.NoContent(http.StatusOK)
	default:
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.core.Outbox.Respond(ctx, cb.ResponseURL, nil, "Countersign is busy with other clicks: nothing was decided. Try again in a moment."); err != nil {
			s.cfg.Log.Warn("could not answer in Slack", "err", err)
		}
		return c.NoContent(http.StatusOK)
	}
}

// slackClick is one click of Approve or Reject, to carry out.
type slackClick struct{ user, verdict, actionID, reason, responseURL string }

// Slack's clicks wait for one of slackWorkers in a queue of slackQueue; a
// click that finds it full is told to try again.
const (
	slackWorkers = 4
	slackQueue   = 256
)

// takeSlackClicks is one of the core's workers carrying out Slack's
// clicks, until ctx ends.
func (s *Server) takeSlackClicks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-s.slackClicks:
			s.slackDecide(k.user, k.verdict, k.actionID, k.reason, k.responseURL)
		}
	}
}

// slackDecide carries out a click and tells the person how it went.
func (s *Server) slackDecide(slackUser, verdict, actionID, reason, responseURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ob := s.core.Outbox
	tell := func(text string) {
		if err := ob.Respond(ctx, responseURL, nil, text); err != nil {
			s.cfg.Log.Warn("could not answer in Slack", "err", err)
		}
	}
	st, err := s.core.Store.StaffBySlack(ctx, slackUser)
	if err != nil {
		tell("Your Slack account is not linked to a Countersign account, so nothing was done. An admin links it on the Staff page.")
		return
	}
	if st.Disabled {
		tell("Your Countersign account is disabled, so nothing was done.")
		return
	}
	actor := st.Actor()
	if !actor.Role.CanDecide() {
		tell("Your Countersign role (" + string(actor.Role) + ") cannot decide actions, so nothing was done.")
		return
	}
	switch verdict {
	case outbox.SlackApprove:
		_, err = s.core.Gate.Approve(ctx, actionID, actor, gate.ApproveRequest{Note: "approved in Slack"})
	default:
		if strings.TrimSpace(reason) == "" {
			tell("Type a reason in the box, then press Reject: it is what the customer's assistant is told. Nothing was done.")
			return
		}
		err = s.core.Gate.Reject(ctx, actionID, actor, reason)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		msg := fault.Message(err)
		if fault.CodeOf(err) == fault.Internal {
			s.cfg.Log.Error("a Slack decision failed", "action", actionID, "err", err)
			msg = "Something went wrong on our side; nothing was done. Try again, or decide in the back office."
		}
		tell(msg)
		if fault.CodeOf(err) != fault.Conflict {
			return
		}
	}
	v, verr := ob.View(ctx, actionID, actor.String())
	if verr != nil {
		return
	}
	if rerr := ob.Respond(ctx, responseURL, &v, "Countersign: "+v.Summary); rerr != nil {
		s.cfg.Log.Warn("could not update the Slack message", "err", rerr)
	}
}
