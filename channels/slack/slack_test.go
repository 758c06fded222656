package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// fakeSlack is Slack's Web API as the outbox uses it (chat.postMessage,
// chat.update), a real HTTP server that keeps what it was sent.
type fakeSlack struct {
	mu    sync.Mutex
	calls []slackCall
}

type slackCall struct {
	method, channel, ts, text, blocks, auth string
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	c := slackCall{method: strings.TrimPrefix(r.URL.Path, "/api/"), channel: r.Form.Get("channel"), ts: r.Form.Get("ts"),
		text: r.Form.Get("text"), blocks: r.Form.Get("blocks"), auth: r.Header.Get("Authorization")}
	if c.auth == "" && r.Form.Get("token") != "" {
		c.auth = "Bearer " + r.Form.Get("token")
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if c.auth != "Bearer xoxb-test" {
		_, _ = w.Write([]byte(`{"ok":false,"error":"invalid_auth"}`))
		return
	}
	ts := c.ts
	if ts == "" {
		ts = "1700000000.000100"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.channel, "ts": ts})
}

func (f *fakeSlack) all() []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slackCall(nil), f.calls...)
}

// Through Slack's Web API, an action that waits is posted with Approve,
// Reject and Open; each approval and the outcome update that same message,
// saying who decided, whether the decision was made in Slack or not.
func TestSlackMessageIsPostedAndUpdated(t *testing.T) {
	fake := &fakeSlack{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{}, poster(t, Config{Token: "xoxb-test", Channel: "C0APPROVE", APIURL: srv.URL + "/api/"}))
	out := e.Refund("cus_bob", "Bob", `{"order_id":"B2001","amount":1200}`)
	e.Deliver()
	calls := fake.all()
	if len(calls) != 1 || calls[0].method != "chat.postMessage" || calls[0].channel != "C0APPROVE" {
		t.Fatalf("posted: %+v", calls)
	}
	post := calls[0]
	for _, want := range []string{SlackApprove, SlackReject, SlackReasonInput, `"value":"` + out.CallID + `"`,
		"Refund $1,200.00 on order B2001", "Bob", "0 of 2", "supervisor", "https://cs.example/actions/" + out.CallID} {
		if !strings.Contains(post.blocks, want) {
			t.Fatalf("the message lacks %q: %s", want, post.blocks)
		}
	}
	ctx := context.Background()
	sue := e.Staff(models.Supervisor, "sue@example.com", "Sue <admin>")
	ann := e.Staff(models.Approver, "ann@example.com", "Ann")
	if _, err := e.Gate.Approve(ctx, out.CallID, sue.Actor(), gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	e.Deliver()
	calls = fake.all()
	if len(calls) != 2 || calls[1].method != "chat.update" || calls[1].ts != "1700000000.000100" || calls[1].channel != "C0APPROVE" ||
		!strings.Contains(calls[1].blocks, "1 of 2") || !strings.Contains(calls[1].blocks, `Sue \u0026lt;admin\u0026gt;`) || calls[1].text != "Refund $1,200.00 on order B2001: approved by Sue &lt;admin&gt; (1 of 2)." ||
		!strings.Contains(calls[1].blocks, SlackApprove) {
		t.Fatalf("after the first approval: %+v", calls[len(calls)-1])
	}
	if _, err := e.Gate.Approve(ctx, out.CallID, ann.Actor(), gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.Deliver()
	}
	calls = fake.all()
	last := calls[len(calls)-1]
	if len(calls) != 4 || last.method != "chat.update" || !strings.Contains(last.blocks, "Approved and done") ||
		strings.Contains(last.blocks, SlackApprove) {
		t.Fatalf("after the decision: %d calls, last %+v", len(calls), last)
	}
	if !strings.Contains(calls[2].blocks, "Approved by Ann") {
		t.Fatalf("who decided: %s", calls[2].blocks)
	}
	// A bad token is a failed delivery, retried, and the token is not in the log.
	bad := outboxtest.New(t, "", demo.Shop, outbox.Config{}, poster(t, Config{Token: "xoxb-wrong", Channel: "C1", APIURL: srv.URL + "/api/"}))
	o := bad.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	bad.Deliver()
	ds, _ := bad.Store.DeliveriesAbout(ctx, o.CallID)
	if len(ds) != 1 || ds[0].Status != models.DeliveryQueued || !strings.Contains(ds[0].LastError, "invalid_auth") || strings.Contains(ds[0].LastError, "xoxb") {
		t.Fatalf("a bad token: %+v", ds)
	}
}

// An action whose rule asks for a passkey has no Approve or Reject button
// in Slack, which cannot sign: the message opens the back office.
func TestSlackOffersTheBackOfficeForPasskeyActions(t *testing.T) {
	v := ActionView{ID: "call_x", Summary: "Refund $900.00 on order A1002", Link: "https://cs.example/actions/call_x",
		Status: models.CallPending, Required: 1, Passkey: true}
	body, _ := json.Marshal(ActionBlocks(v, true))
	if strings.Contains(string(body), SlackApprove) || strings.Contains(string(body), SlackReject) ||
		!strings.Contains(string(body), "Open to sign with your passkey") || !strings.Contains(string(body), v.Link) {
		t.Fatalf("blocks: %s", body)
	}
	v.Passkey = false
	body, _ = json.Marshal(ActionBlocks(v, true))
	if !strings.Contains(string(body), SlackApprove) {
		t.Fatalf("an ordinary action lost its buttons: %s", body)
	}
}

// poster is the Slack channel as cfg sets it up, over the env's store.
func poster(t testing.TB, cfg Config) func(*storage.Store) outbox.Channel {
	return func(store *storage.Store) outbox.Channel {
		cfg.Store = store
		ch, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}
