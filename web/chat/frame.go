package chat

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// The chat frame is the widget's panel: an iframe on Countersign's own
// origin, so the shop's page can neither style nor script the conversation.
// The run token lives in an HttpOnly cookie scoped to /chat (partitioned per
// shop site over TLS); it never appears in a URL or a log line.

const chatCookie = "cs_chat"

// chatHeaders lets the chat frame be embedded by the configured shop
// origins, and nobody else.
func (d *Door) chatHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	ancestors := "'self'"
	for _, o := range d.opts.WidgetOrigins {
		ancestors += " " + o
	}
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors " + ancestors
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", csp)
		h.Del("X-Frame-Options")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// chatRun finds the run of the chat cookie, if any.
func (d *Door) chatRun(c echo.Context) *models.Run {
	ck, err := c.Cookie(chatCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	run, err := d.core.Store.RunByTokenHash(c.Request().Context(), models.HashToken(ck.Value))
	if err != nil || run.Status == models.RunClosed {
		return nil
	}
	return run
}

// setChatCookie keeps the run token for 30 days; an empty token forgets it.
func (d *Door) setChatCookie(c echo.Context, token string) {
	maxAge := 30 * 24 * 3600
	if token == "" {
		maxAge = -1
	}
	ck := &http.Cookie{Name: chatCookie, Value: token, Path: views.PathChat, MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	if d.kit.OverTLS(c.Request()) {
		// Inside a shop's page the frame is a third party: the cookie must
		// be SameSite=None, and is partitioned per shop site (CHIPS).
		ck.Secure, ck.SameSite, ck.Partitioned = true, http.SameSiteNoneMode, true
	}
	c.SetCookie(ck)
}

func (d *Door) chatView(ctx context.Context, run *models.Run) (views.ChatView, error) {
	if run == nil {
		return views.ChatView{}, nil
	}
	turns, err := d.core.Store.Turns(ctx, run.ID, 0)
	if err != nil {
		return views.ChatView{}, err
	}
	v := views.ChatView{HasRun: true, Working: run.Status == models.RunActive}
	for _, t := range turns {
		if t.Role == models.RoleTool || (t.Role == models.RoleAssistant && t.Text == "") {
			continue // results are for the model; empty assistant turns only asked for tools
		}
		v.Turns = append(v.Turns, views.ChatTurn{Seq: t.Seq, Role: t.Role, Text: t.Text})
	}
	return v, nil
}

// freshChatView reads the run again (its status moves on) and builds the view.
func (d *Door) freshChatView(ctx context.Context, runID string) (views.ChatView, error) {
	run, err := d.core.Store.Run(ctx, runID)
	if err != nil {
		return views.ChatView{}, err
	}
	return d.chatView(ctx, run)
}

// chatPage is the frame. It shows no stored conversation: that waits until
// the frame says who is signed in (chatIdentity).
func (d *Door) chatPage(c echo.Context) error {
	return doorkit.Render(c, http.StatusOK, views.ChatPage(views.ChatView{}))
}

// chatIdentity tells the frame who the customer token names and, when the
// browser's conversation is that customer's (or a guest's, for a guest),
// hands it over; another customer's conversation is forgotten by this
// browser, so whoever is signed in now starts afresh.
func (d *Door) chatIdentity(c echo.Context) error {
	if err := d.sameOriginHTMX(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	cust, idv := d.identityFor(c.FormValue("customer_token"))
	conv := views.ChatView{}
	if run := d.chatRun(c); run != nil {
		if run.CustomerID == cust.ID {
			v, err := d.chatView(ctx, run)
			if err != nil {
				return err
			}
			v.Grant = d.chatGrant(run.ID, run.CustomerID, time.Now())
			conv = v
		} else {
			d.setChatCookie(c, "")
		}
	}
	conv.OOB = true
	return doorkit.Render(c, http.StatusOK, templ.Join(views.ChatIdentity(idv), views.ChatConversation(conv)))
}

func (d *Door) identityFor(token string) (Customer, views.ChatIdentityView) {
	if strings.TrimSpace(token) == "" {
		return Customer{}, views.ChatIdentityView{Anonymous: true}
	}
	cust, err := d.opts.Customers.Verify(token)
	if err != nil {
		// Said to the customer, about their own sign-in.
		problem := "your sign-in to the shop could not be checked"
		if strings.Contains(fault.Message(err), "expired") {
			problem = "your sign-in to the shop has expired"
		}
		return Customer{}, views.ChatIdentityView{Anonymous: true, Problem: problem}
	}
	name := cust.Name
	if name == "" {
		name = cust.ID
	}
	return cust, views.ChatIdentityView{Name: name}
}

// sameOriginHTMX refuses chat posts that did not come from the chat frame
// itself: a cross-site form cannot send the HX-Request header, and browsers
// name the origin of every fetch.
func (d *Door) sameOriginHTMX(c echo.Context) error {
	r := c.Request()
	if r.Header.Get("HX-Request") != "true" {
		return fault.Errorf(fault.Forbidden, "send messages from the chat window")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != d.kit.PublicHost(r) {
			return fault.Errorf(fault.Forbidden, "send messages from the chat window")
		}
	}
	return nil
}

// chatMessage posts a message, starting a run when there is none yet (or
// when the customer token names someone else than the run's customer).
func (d *Door) chatMessage(c echo.Context) error {
	if err := d.sameOriginHTMX(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	text := c.FormValue("text")
	run := d.chatRun(c)
	fail := func(status int, msg string) error {
		v, err := d.chatView(ctx, run)
		if err != nil {
			return err
		}
		if run != nil {
			v.Grant = d.chatGrant(run.ID, run.CustomerID, time.Now())
		}
		v.Error = msg
		return doorkit.Render(c, status, views.ChatConversation(v))
	}
	if !d.perAddress.Allow(c.RealIP()) || (run != nil && !d.perRun.Allow(run.ID)) {
		return fail(http.StatusTooManyRequests, "You're sending messages very quickly. Please wait a moment and try again.")
	}
	var cust Customer
	if tok := strings.TrimSpace(c.FormValue("customer_token")); tok != "" {
		if v, err := d.opts.Customers.Verify(tok); err == nil {
			cust = v
		} // a bad token means a guest chat; the frame already says so
	}
	if run != nil && run.CustomerID != cust.ID {
		run = nil // someone else is signed in now: a new conversation
	}
	var done <-chan struct{}
	var err error
	if run == nil {
		var st runloop.Started
		st, err = d.core.Runner.StartRun(ctx, runloop.StartRequest{CustomerID: cust.ID, CustomerName: cust.Name, Channel: "widget", Message: text})
		if err == nil {
			d.setChatCookie(c, st.Token)
			run, done = st.Run, st.Done
		}
	} else {
		done, err = d.core.Runner.PostMessage(ctx, run.ID, text)
	}
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return fail(doorkit.HTTPStatus(fault.CodeOf(err)), doorkit.Sentence(fault.Message(err)))
	}
	d.await(c, done)
	v, err := d.freshChatView(ctx, run.ID)
	if err != nil {
		return err
	}
	v.Grant = d.chatGrant(run.ID, run.CustomerID, time.Now())
	return doorkit.Render(c, http.StatusOK, views.ChatConversation(v))
}

// chatEvents streams the conversation to the frame as it changes.
func (d *Door) chatEvents(c echo.Context) error {
	run := d.chatRun(c)
	if run == nil || !d.validChatGrant(c.QueryParam("g"), run.ID, run.CustomerID, time.Now()) {
		return fault.Errorf(fault.NotFound, "no conversation yet")
	}
	sub, ok := d.runs.Subscribe(run.ID, MaxStreamsPerRun)
	if !ok {
		return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "this conversation is open in too many windows"}
	}
	defer d.runs.Unsubscribe(sub)
	w := doorkit.StartSSE(c)
	ctx := c.Request().Context()
	send := func() bool {
		v, err := d.freshChatView(ctx, run.ID)
		if err != nil {
			return false
		}
		var b bytes.Buffer
		if err := views.ChatLog(v).Render(ctx, &b); err != nil {
			return false
		}
		if _, err := w.Write(doorkit.SSEData("log", b.Bytes())); err != nil {
			return false
		}
		w.Flush()
		return true
	}
	if !send() {
		return nil
	}
	doorkit.Follow(ctx, w, sub.C, func(runloop.Event) bool {
		// Coalesce a burst of turns into one render.
		drain(sub.C, 10*time.Millisecond)
		return send()
	})
	return nil
}

func drain(ch <-chan runloop.Event, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-t.C:
			return
		}
	}
}
