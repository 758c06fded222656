// Package slack is the channel that posts each action that waits to a
// Slack channel, with Approve and Reject, and updates the message as the
// action is decided; its inbound route (inbound.go) takes the clicks.
// Only this package speaks Slack (slack-go).
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	slack "github.com/slack-go/slack"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// The ids of a Slack message's parts, read back by the inbound route
// (inbound.go): the buttons' action ids carry the verdict, their value the
// action's id, and the reason box is read from the message's state.
const (
	SlackApprove     = "countersign_approve"
	SlackReject      = "countersign_reject"
	SlackOpen        = "countersign_open"
	SlackReasonBlock = "countersign_reason"
	SlackReasonInput = "countersign_reason_text"
)

// slackMessage is a queued Slack delivery: a new message, or an update of
// the one posted for the action (posted anew when it cannot be updated).
type slackMessage struct {
	Update bool            `json:"update,omitempty"`
	Text   string          `json:"text"`
	Blocks json.RawMessage `json:"blocks"`
}

// Queue queues what Slack is told of an action: the action when it waits
// (with buttons), the step or the outcome when that changes, a note when
// it is overdue or about to expire.
func (c *Channel) Queue(tx *storage.Tx, n outbox.Notice) error {
	var m slackMessage
	switch n.Kind {
	case outbox.TypeActionPending:
		m = slackMessage{Text: "Approval needed: " + n.Summary, Blocks: mustBlocks(ActionBlocks(view(n), true))}
	case outbox.NoticeApprovalAdded, outbox.TypeActionDecided:
		m = slackMessage{Update: true, Text: statusLine(n), Blocks: mustBlocks(ActionBlocks(view(n), n.Call.Status == models.CallPending))}
	case outbox.TypeCallFinished:
		if n.Call.Decision != models.DecidedNeedsApproval {
			return nil
		}
		m = slackMessage{Update: true, Text: statusLine(n), Blocks: mustBlocks(ActionBlocks(view(n), false))}
	case outbox.TypeActionOverdue, outbox.TypeActionReminder:
		text := statusLine(n)
		m = slackMessage{Text: text, Blocks: mustBlocks(slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, escapeSlack(text)+"\n<"+n.Link+"|Open it>", false, false), nil, nil)}})}
	default:
		return nil
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return tx.Enqueue(&models.Delivery{Channel: c.Name(), Target: "slack", Event: string(n.Kind), Subject: n.Call.ID, Body: string(body)})
}

// ActionView is what a Slack message says of an action.
type ActionView struct {
	ID, Summary, Customer, Rule, Reason, Link string
	Status                                    models.CallStatus
	Approvals, Required                       int
	Role                                      string
	By                                        string // who decided, or the latest step
	Outcome                                   string
	// Passkey: the rule asks for a passkey signature, which Slack cannot
	// give: the message offers the back office instead of Approve.
	Passkey bool
}

func view(n outbox.Notice) ActionView {
	c := n.Call
	v := ActionView{ID: c.ID, Summary: n.Summary, Customer: n.Customer, Rule: c.Rule, Reason: c.Reason, Link: n.Link,
		Status: c.Status, Approvals: n.Approved, Required: n.Required(), Role: string(c.RequiredRole), Passkey: n.Passkey}
	if n.Kind != outbox.TypeActionPending {
		v.By = n.By()
	}
	if c.Status != models.CallPending && c.Status != models.CallApproved {
		v.Outcome = c.Error
	}
	return v
}

// statusLine says in one line where the action is.
func statusLine(n outbox.Notice) string {
	by := n.By()
	switch n.Kind {
	case outbox.TypeActionOverdue:
		return fmt.Sprintf("Overdue: %s for %s has waited too long for a decision.", n.Summary, n.CustomerOrAnonymous())
	case outbox.TypeActionReminder:
		return fmt.Sprintf("Reminder: %s for %s expires soon unless someone decides.", n.Summary, n.CustomerOrAnonymous())
	case outbox.NoticeApprovalAdded:
		return fmt.Sprintf("%s: approved by %s (%d of %d).", n.Summary, by, n.Approved, n.Required())
	}
	return fmt.Sprintf("%s: %s.", n.Summary, outcomeWords(n.Call.Status, by))
}

func outcomeWords(s models.CallStatus, by string) string {
	switch s {
	case models.CallApproved, models.CallExecuting:
		return "approved by " + by
	case models.CallSucceeded:
		return "approved and done"
	case models.CallFailed:
		return "approved, but it failed"
	case models.CallUnknown:
		return "approved; whether it went through is unknown, a supervisor must check"
	case models.CallInvalidated:
		return "approved, but not run: what was approved changed before it ran"
	case models.CallRejected:
		return "rejected by " + by
	case models.CallExpired:
		return "expired: nobody decided in time"
	case models.CallCancelled:
		return "cancelled"
	}
	return string(s)
}

func orAnonymous(customer string) string { // ActionView's customer
	if customer == "" {
		return "an anonymous customer"
	}
	return customer
}

// escapeSlack escapes what Slack's mrkdwn reads as markup.
func escapeSlack(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// ActionBlocks is a Slack message for an action: what it asks, for whom,
// why, where it stands; with buttons and a reason box while it waits.
func ActionBlocks(v ActionView, buttons bool) slack.Blocks {
	md := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
	}
	plain := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	head := "*" + escapeSlack(v.Summary) + "*"
	if v.Status == models.CallPending {
		head = "Approval needed: " + head
	}
	fields := []*slack.TextBlockObject{
		md("*Customer*\n" + escapeSlack(orAnonymous(v.Customer))),
		md("*Rule*\n" + escapeSlack(v.Rule)),
		md("*Approvals*\n" + fmt.Sprintf("%d of %d", v.Approvals, v.Required)),
	}
	if v.Role != "" {
		fields = append(fields, md("*Needs*\n"+escapeSlack(v.Role)))
	}
	blocks := []slack.Block{slack.NewSectionBlock(md(head+"\n"+escapeSlack(v.Reason)), fields, nil)}
	if v.Status != models.CallPending {
		status := outcomeWords(v.Status, v.By)
		if v.Outcome != "" {
			status += " (" + v.Outcome + ")"
		}
		blocks = append(blocks, slack.NewContextBlock("countersign_status", md("*"+escapeSlack(strings.ToUpper(status[:1])+status[1:])+"*")))
	} else if v.By != "" && v.Approvals > 0 {
		blocks = append(blocks, slack.NewContextBlock("countersign_status", md(escapeSlack(fmt.Sprintf("Approved by %s (%d of %d)", v.By, v.Approvals, v.Required)))))
	}
	if buttons && v.Passkey {
		blocks = append(blocks, slack.NewContextBlock("countersign_passkey", md("This rule asks for your passkey: decide it in the back office.")))
		open := slack.NewButtonBlockElement(SlackOpen, v.ID, plain("Open to sign with your passkey"))
		open.URL, open.Style = v.Link, slack.StylePrimary
		blocks = append(blocks, slack.NewActionBlock("countersign_actions", open))
	} else if buttons {
		reason := slack.NewInputBlock(SlackReasonBlock, plain("Reason (needed to reject)"), nil,
			slack.NewPlainTextInputBlockElement(plain("Why not?"), SlackReasonInput))
		reason.Optional = true
		reason.DispatchAction = false
		approve := slack.NewButtonBlockElement(SlackApprove, v.ID, plain("Approve"))
		approve.Style = slack.StylePrimary
		reject := slack.NewButtonBlockElement(SlackReject, v.ID, plain("Reject"))
		reject.Style = slack.StyleDanger
		open := slack.NewButtonBlockElement(SlackOpen, v.ID, plain("Open"))
		open.URL = v.Link
		blocks = append(blocks, reason, slack.NewActionBlock("countersign_actions", approve, reject, open))
	} else {
		open := slack.NewButtonBlockElement(SlackOpen, v.ID, plain("Open"))
		open.URL = v.Link
		blocks = append(blocks, slack.NewActionBlock("countersign_actions", open))
	}
	return slack.Blocks{BlockSet: blocks}
}

func mustBlocks(b slack.Blocks) json.RawMessage {
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // blocks built here always marshal
	}
	return out
}

// Send posts or updates a message. Through the Web API the posted
// message's channel and timestamp come back as the delivery's ref, and an
// update edits that message; through an incoming webhook (which cannot
// edit) an update is posted as a message of its own.
func (c *Channel) Send(ctx context.Context, d models.Delivery) (string, error) {
	var m slackMessage
	if err := json.Unmarshal([]byte(d.Body), &m); err != nil {
		return "", outbox.Permanent{Err: fmt.Errorf("a Slack message that does not decode: %w", err)}
	}
	var blocks slack.Blocks
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		return "", outbox.Permanent{Err: fmt.Errorf("a Slack message that does not decode: %w", err)}
	}
	if c.cfg.Token != "" {
		api := c.api()
		if m.Update {
			ref, err := c.cfg.Store.DeliveryRef(ctx, c.Name(), string(outbox.TypeActionPending), d.Subject)
			if err != nil {
				return "", err
			}
			if channel, ts, ok := strings.Cut(ref, "/"); ok {
				_, _, _, err := api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(escapeSlack(m.Text), false), slack.MsgOptionBlocks(blocks.BlockSet...))
				return "", slackError(err)
			}
		}
		channel, ts, err := api.PostMessageContext(ctx, c.cfg.Channel, slack.MsgOptionText(escapeSlack(m.Text), false), slack.MsgOptionBlocks(blocks.BlockSet...))
		if err != nil {
			return "", slackError(err)
		}
		return channel + "/" + ts, nil
	}
	if c.cfg.Webhook == "" {
		return "", outbox.Permanent{Err: errors.New("no Slack webhook or token is configured any longer")}
	}
	return "", slackError(slack.PostWebhookCustomHTTPContext(ctx, c.cfg.Webhook, c.cfg.Client,
		&slack.WebhookMessage{Text: escapeSlack(m.Text), Blocks: &blocks}))
}

func (c *Channel) api() *slack.Client {
	opts := []slack.Option{slack.OptionHTTPClient(c.cfg.Client)}
	if c.cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(c.cfg.APIURL))
	}
	return slack.New(c.cfg.Token, opts...)
}

// slackError keeps Slack's answer and drops anything that could hold the
// webhook's secret path.
func slackError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if i := strings.Index(msg, "hooks.slack.com"); i >= 0 {
		msg = msg[:i] + "(the webhook)"
	}
	return errors.New("Slack: " + msg)
}

// respond answers a Slack interaction through its response_url: replace
// the message the person clicked (v), or tell them alone (v nil).
func (c *Channel) respond(ctx context.Context, responseURL string, v *ActionView, text string) error {
	msg := &slack.WebhookMessage{Text: escapeSlack(text)}
	if v != nil {
		blocks := ActionBlocks(*v, v.Status == models.CallPending)
		msg.Blocks, msg.ReplaceOriginal = &blocks, true
	} else {
		msg.ResponseType = slack.ResponseTypeEphemeral
	}
	return slackError(slack.PostWebhookCustomHTTPContext(ctx, responseURL, c.cfg.Client, msg))
}
