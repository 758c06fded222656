package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	slack "github.com/slack-go/slack"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models/fault"
)

// Route is POST /integrations/slack/interactions, when a signing secret is
// set: a click on a message's Approve or Reject.
func (c *Channel) Route(desk outbox.Desk) (string, http.Handler) {
	if c.cfg.SigningSecret == "" {
		return "", nil
	}
	return "/integrations/slack/interactions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.interaction(w, r, desk)
	})
}

// interaction takes a click. Slack signs the request with the app's
// signing secret (v0: HMAC-SHA256 over "v0:<timestamp>:<body>", refused
// when the timestamp is more than five minutes off); the click acts as the
// staff account linked to the Slack user, with the same checks as the back
// office (role, the approvals needed, expiry). The request is answered at
// once, as Slack wants within three seconds; the outcome reaches the person
// through the interaction's response_url: the message replaced with where
// the action stands, or a note only they see when nothing changed.
func (c *Channel) interaction(w http.ResponseWriter, r *http.Request, desk outbox.Desk) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err != nil || len(body) > 64<<10 {
		http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, c.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		c.cfg.Log.Warn("refused a Slack interaction", "err", err, "remote", r.RemoteAddr)
		http.Error(w, "the Slack signature does not verify", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slack.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		http.Error(w, "the interaction does not parse", http.StatusBadRequest)
		return
	}
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		w.WriteHeader(http.StatusOK) // not a click we act on
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.ActionID != SlackApprove && act.ActionID != SlackReject {
		w.WriteHeader(http.StatusOK) // Open: a link, nothing to do
		return
	}
	reason := ""
	if cb.BlockActionState != nil {
		reason = cb.BlockActionState.Values[SlackReasonBlock][SlackReasonInput].Value
	}
	// Slack wants its answer within 3 seconds; deciding may take longer
	// (an approval runs the call): one of the workers takes it.
	select {
	case c.clicks <- click{desk, cb.User.ID, act.ActionID, act.Value, reason, cb.ResponseURL}:
	default:
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := c.respond(ctx, cb.ResponseURL, nil, "Countersign is busy with other clicks: nothing was decided. Try again in a moment."); err != nil {
			c.cfg.Log.Warn("could not answer in Slack", "err", err)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// click is one click of Approve or Reject, to carry out.
type click struct {
	desk                                         outbox.Desk
	user, verdict, actionID, reason, responseURL string
}

// Slack's clicks wait for one of clickWorkers in a queue of clickQueue; a
// click that finds it full is told to try again.
const (
	clickWorkers = 4
	clickQueue   = 256
)

// Jobs are the workers that carry out Slack's clicks.
func (c *Channel) Jobs() []outbox.Job {
	if c.cfg.SigningSecret == "" {
		return nil
	}
	jobs := make([]outbox.Job, clickWorkers)
	for i := range jobs {
		jobs[i] = outbox.Job{Name: "slack clicks", Run: c.takeClicks}
	}
	return jobs
}

// takeClicks carries out Slack's clicks until ctx ends.
func (c *Channel) takeClicks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-c.clicks:
			c.decide(k)
		}
	}
}

// decide carries out a click and tells the person how it went.
func (c *Channel) decide(k click) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tell := func(text string) {
		if err := c.respond(ctx, k.responseURL, nil, text); err != nil {
			c.cfg.Log.Warn("could not answer in Slack", "err", err)
		}
	}
	st, err := k.desk.Store().StaffByLink(ctx, "slack", k.user)
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
	switch k.verdict {
	case SlackApprove:
		err = k.desk.Approve(ctx, k.actionID, actor, "approved in Slack")
	default:
		if strings.TrimSpace(k.reason) == "" {
			tell("Type a reason in the box, then press Reject: it is what the customer's assistant is told. Nothing was done.")
			return
		}
		err = k.desk.Reject(ctx, k.actionID, actor, k.reason)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		msg := fault.Message(err)
		if fault.CodeOf(err) == fault.Internal {
			c.cfg.Log.Error("a Slack decision failed", "action", k.actionID, "err", err)
			msg = "Something went wrong on our side; nothing was done. Try again, or decide in the back office."
		}
		tell(msg)
		if fault.CodeOf(err) != fault.Conflict {
			return
		}
	}
	n, err := k.desk.View(ctx, k.actionID, actor.String())
	if err != nil {
		return
	}
	v := view(n)
	if err := c.respond(ctx, k.responseURL, &v, "Countersign: "+v.Summary); err != nil {
		c.cfg.Log.Warn("could not update the Slack message", "err", err)
	}
}

// userID is how Slack writes a user's id (U…, or W… on Enterprise Grid).
var userID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

// Link implements outbox.Linking: a click on a message's buttons acts as
// the account its Slack user is linked to.
func (c *Channel) Link() outbox.Link {
	return outbox.Link{Channel: c.Name(), Label: "Slack user", Example: "U012AB3CD", Check: func(id string) (string, error) {
		id = strings.ToUpper(strings.TrimSpace(id))
		if !userID.MatchString(id) {
			return "", fmt.Errorf("%q is not a Slack user id: it looks like U012AB3CD (in Slack: the member's profile, ⋮, Copy member ID)", id)
		}
		return id, nil
	}}
}
