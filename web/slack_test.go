package web_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
)

const slackSecret = "slack-signing-secret-for-tests"

// slackWorld is Slack as Countersign meets it: the incoming webhook the
// messages are posted to, and the response_urls interactions are answered
// on. A real HTTP server that keeps what it is sent.
type slackWorld struct {
	mu    sync.Mutex
	hook  []map[string]any            // messages posted to the webhook
	reply map[string][]map[string]any // answers, by response_url path
	srv   *httptest.Server
}

func newSlackWorld(t *testing.T) *slackWorld {
	w := &slackWorld{reply: map[string][]map[string]any{}}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.mu.Lock()
		if r.URL.Path == "/hook" {
			w.hook = append(w.hook, m)
		} else {
			w.reply[r.URL.Path] = append(w.reply[r.URL.Path], m)
		}
		w.mu.Unlock()
		_, _ = rw.Write([]byte("ok"))
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// waitReply waits for an answer on a response_url path.
func (w *slackWorld) waitReply(t *testing.T, path string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		got := w.reply[path]
		w.mu.Unlock()
		if len(got) > 0 {
			return got[len(got)-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no answer on %s", path)
	return nil
}

// waitHook waits for the nth message posted to the webhook.
func (w *slackWorld) waitHook(t *testing.T, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		got := w.hook
		w.mu.Unlock()
		if len(got) >= n {
			return got[n-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d messages posted to the Slack webhook", n)
	return nil
}

// slackApp is the demo app posting to the fake Slack's webhook, with the
// interactions endpoint on.
func slackApp(t *testing.T, w *slackWorld) *app {
	t.Helper()
	return outboxApp(t, outbox.Config{}, web.Config{Customers: chat.NewCustomerVerifier(secret), ReplyWait: 5 * time.Second},
		func(store *storage.Store) outbox.Channel {
			ch, err := slack.New(slack.Config{Webhook: w.srv.URL + "/hook", SigningSecret: slackSecret, Store: store})
			if err != nil {
				t.Fatal(err)
			}
			return ch
		})
}

// outboxApp is the demo app with an outbox of the given configuration,
// over the channels given.
func outboxApp(t *testing.T, oc outbox.Config, wc web.Config, channels ...func(*storage.Store) outbox.Channel) *app {
	t.Helper()
	store := openStore(t)
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	pol, err := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	oc.Link = func(id string) string { return "https://cs.example" + views.ActionPath(id) }
	for _, ch := range channels {
		oc.Channels = append(oc.Channels, ch(store))
	}
	return startApp(t, appConfig{Store: store, Tools: reg, Policy: pol, Model: offline.Model{}, Business: shop.Facts{Store: store},
		Log: discardLog(), Reach: oc,
		Web: wc}, false)
}

// click is a signed Slack interaction: user pressed the button on the
// action's message, with the reason box holding reason. at is when Slack
// signed it; key is the secret it signed with.
func (a *app) click(key string, at time.Time, user, button, actionID, reason, responsePath string, w *slackWorld) int {
	a.t.Helper()
	base := "http://127.0.0.1:1"
	if w != nil {
		base = w.srv.URL
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "response_url": base + responsePath,
		"actions": []map[string]any{{"action_id": button, "block_id": "countersign_actions", "value": actionID, "type": "button"}},
		"state": map[string]any{"values": map[string]any{slack.SlackReasonBlock: map[string]any{
			slack.SlackReasonInput: map[string]any{"type": "plain_text_input", "value": reason}}}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/integrations/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func (a *app) approvalsOf(id string) (models.CallStatus, int) {
	a.t.Helper()
	c, _, n, err := a.store.CallNotice(context.Background(), id)
	if err != nil {
		a.t.Fatal(err)
	}
	return c.Status, n
}

// An action that waits is posted to Slack with its buttons. A correctly
// signed click acts as the linked staff account, with the back office's
// rules: a two-person action needs a second person; a bad signature, an old
// timestamp, an unlinked Slack user and an auditor change nothing (the
// latter two are told why, to them alone); Reject needs a reason. The
// outcome replaces the clicked message, and the decision is posted.
func TestSlackApprovesAsTheLinkedAccount(t *testing.T) {
	w := newSlackWorld(t)
	a := slackApp(t, w)
	a.staff(models.Admin, "ada@example.com", "Ada")
	sue := a.staff(models.Supervisor, "sue@example.com", "Sue")
	ann := a.staff(models.Approver, "ann@example.com", "Ann")
	otto := a.staff(models.Auditor, "otto@example.com", "Otto")
	admin := a.signIn("ada@example.com")
	for st, slackID := range map[*models.Staff]string{sue: "U0SUE", ann: "u0ann", otto: "U0OTTO"} {
		res, body := admin.post(views.Reverse(views.PathStaffLink, st.ID, "slack"), url.Values{"csrf": {admin.csrf}, "address": {slackID}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("link %s: %d %s", st.Name, res.StatusCode, body)
		}
	}
	if res, body := admin.post(views.Reverse(views.PathStaffLink, ann.ID, "slack"), url.Values{"csrf": {admin.csrf}, "address": {"not an id"}}); res.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "is not a Slack user id") {
		t.Fatalf("a bad Slack id: %d", res.StatusCode)
	}
	if res, body := admin.post(views.Reverse(views.PathStaffLink, otto.ID, "slack"), url.Values{"csrf": {admin.csrf}, "address": {"U0SUE"}}); res.StatusCode != http.StatusConflict ||
		!strings.Contains(body, "already linked to another account") {
		t.Fatalf("Sue's Slack user linked to Otto too: %d", res.StatusCode)
	}
	if res, _ := admin.post(views.Reverse(views.PathStaffLink, ann.ID, "webhook"), url.Values{"csrf": {admin.csrf}, "address": {"U0ANN"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a channel that links nobody: %d", res.StatusCode)
	}
	if res, _ := admin.post(views.Reverse(views.PathStaffLink, ann.ID, "slack"), url.Values{"address": {"U0X"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("linking without the CSRF token: %d", res.StatusCode)
	}
	if _, page := admin.get(views.PathStaff); !strings.Contains(page, "<th>Slack user</th>") || !strings.Contains(page, `value="U0ANN"`) {
		t.Fatal("the staff page should show each account's Slack user, normalized")
	}

	out := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200}`)
	msg := w.waitHook(t, 1)
	blocks, _ := json.Marshal(msg["blocks"])
	if !strings.Contains(string(blocks), out.CallID) || !strings.Contains(string(blocks), "Refund $1,200.00 on order B2001") {
		t.Fatalf("the message: %s", blocks)
	}
	now := time.Now()
	if code := a.click("wrong-secret", now, "U0SUE", slack.SlackApprove, out.CallID, "", "/r/bad", w); code != http.StatusUnauthorized {
		t.Fatalf("a bad signature: %d", code)
	}
	if code := a.click(slackSecret, now.Add(-6*time.Minute), "U0SUE", slack.SlackApprove, out.CallID, "", "/r/old", w); code != http.StatusUnauthorized {
		t.Fatalf("an old timestamp: %d", code)
	}
	if code := a.click(slackSecret, now, "U0NOBODY", slack.SlackApprove, out.CallID, "", "/r/nobody", w); code != http.StatusOK {
		t.Fatalf("an unlinked user: %d", code)
	}
	if r := w.waitReply(t, "/r/nobody"); r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "not linked") {
		t.Fatalf("the unlinked user was told: %v", r)
	}
	a.click(slackSecret, now, "U0OTTO", slack.SlackApprove, out.CallID, "", "/r/otto", w)
	if r := w.waitReply(t, "/r/otto"); r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "cannot decide") {
		t.Fatalf("the auditor was told: %v", r)
	}
	if st, n := a.approvalsOf(out.CallID); st != models.CallPending || n != 0 {
		t.Fatalf("after refused clicks: %s, %d approvals", st, n)
	}

	a.click(slackSecret, now, "U0SUE", slack.SlackApprove, out.CallID, "", "/r/sue", w)
	r := w.waitReply(t, "/r/sue")
	if r["replace_original"] != true || !strings.Contains(mustJSON(r["blocks"]), "1 of 2") {
		t.Fatalf("the first approval's message: %v", r)
	}
	if st, n := a.approvalsOf(out.CallID); st != models.CallPending || n != 1 {
		t.Fatalf("after one of two: %s, %d approvals", st, n)
	}
	a.click(slackSecret, now, "U0ANN", slack.SlackReject, out.CallID, "  ", "/r/ann-reject", w)
	if r := w.waitReply(t, "/r/ann-reject"); !strings.Contains(fmt.Sprint(r["text"]), "Type a reason") {
		t.Fatalf("a rejection without a reason: %v", r)
	}
	a.click(slackSecret, now, "U0ANN", slack.SlackApprove, out.CallID, "", "/r/ann", w)
	r = w.waitReply(t, "/r/ann")
	if !strings.Contains(mustJSON(r["blocks"]), "Approved") || strings.Contains(mustJSON(r["blocks"]), slack.SlackApprove) {
		t.Fatalf("the decided message: %v", r)
	}
	if st, n := a.approvalsOf(out.CallID); n != 2 || (st != models.CallSucceeded && st != models.CallExecuting && st != models.CallApproved) {
		t.Fatalf("after two of two: %s, %d approvals", st, n)
	}
	// The decision is posted too (an incoming webhook cannot edit the first message).
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		var texts []string
		for _, m := range w.hook {
			texts = append(texts, fmt.Sprint(m["text"]))
		}
		w.mu.Unlock()
		if strings.Contains(strings.Join(texts, "\n"), "approved by Ann") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decision was not posted: %q", texts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The staff page lists the deliveries.
	_, page := admin.get(views.PathStaff)
	if !strings.Contains(page, `data-testid="deliveries"`) || !strings.Contains(page, "action.pending") || !strings.Contains(page, "delivered") {
		t.Fatal("the staff page does not list the deliveries")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// An action nobody answers in time is marked overdue in the queue (here
// after a millisecond), and one answered in time is not; without a signing
// secret there are no Slack interactions to take.
func TestQueueMarksOverdueActions(t *testing.T) {
	a := outboxApp(t, outbox.Config{EscalateAfter: time.Millisecond}, web.Config{Customers: chat.NewCustomerVerifier(secret)})
	a.staff(models.Approver, "ann@example.com", "Ann")
	out := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1001","amount":100}`)
	b := a.signIn("ann@example.com")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, page := b.get(views.PathQueue)
		if strings.Contains(page, `data-testid="overdue"`) && strings.Contains(page, out.CallID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the action was not marked overdue in the queue")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := a.click(slackSecret, time.Now(), "U0ANN", slack.SlackApprove, out.CallID, "", "/r", nil); code != http.StatusNotFound {
		t.Fatalf("Slack interactions without a signing secret: %d", code)
	}
}
