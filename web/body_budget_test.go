package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// The bytes of call bodies held at once are bounded across every request,
// not only per request: while one agent's large body is being read, a
// second that would pass the bound waits, then is answered 503 with
// Retry-After and nothing done; when the first ends, the next is taken.
// Small calls never wait.
func TestCallBodiesHeldAtOnceAreBounded(t *testing.T) {
	a := newAppWith(t, func(c *web.Config) { c.BodyBudget, c.BodyBudgetWait = 3<<20, 300*time.Millisecond })
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bulk-bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(ctx, "other-bot", models.Actor{ID: "test"})
	body := `{"tool":"get_order_status","args":{"order_id":"` + strings.Repeat("A", 1800<<10) + `"},"session":"s1","customer_id":"cus_alice"}`

	// The first: its headers say its length, its body trickles.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", a.srv.URL+"/api/v1/calls", pr)
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	first := make(chan int, 1)
	go func() {
		res, err := a.srv.Client().Do(req)
		if err != nil {
			first <- 0
			return
		}
		res.Body.Close()
		first <- res.StatusCode
	}()
	if _, err := pw.Write([]byte(body[:1000])); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); a.server.BodyBytesHeld() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // the server is reading it: its room is taken
			t.Fatal("the first large body never took its room")
		}
	}

	r := a.do("POST", "/api/v1/calls", other, body)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Raw, "send this call again") {
		t.Fatalf("a second large body beside the first: %d %s", r.Status, r.Raw)
	}
	// Over /mcp the refusal is in MCP's words: a tool error result.
	mcp := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_order_status","arguments":{"order_id":"` + strings.Repeat("A", 1800<<10) + `"}}}`
	mreq, _ := http.NewRequest("POST", a.srv.URL+"/mcp", strings.NewReader(mcp))
	mreq.Header.Set("Authorization", "Bearer "+other)
	mreq.Header.Set("Content-Type", "application/json")
	mreq.Header.Set("Accept", "application/json, text/event-stream")
	mres, err := a.srv.Client().Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	said, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	if mres.StatusCode != 200 || !strings.Contains(string(said), `"id":7`) || !strings.Contains(string(said), `"isError":true`) || !strings.Contains(string(said), "send this call again") {
		t.Fatalf("a large MCP call beside the first: %d %s", mres.StatusCode, said)
	}
	if r := a.do("POST", "/api/v1/calls", other, `{"tool":"get_order_status","args":{"order_id":"A1001"},"session":"s2","customer_id":"cus_alice"}`); r.Status != http.StatusCreated {
		t.Fatalf("a small call waited on the large one: %d %s", r.Status, r.Raw)
	}
	if _, err := pw.Write([]byte(body[1000:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if got := <-first; got == 0 || got == http.StatusServiceUnavailable {
		t.Fatalf("the first large call: %d", got)
	}
	if r := a.do("POST", "/api/v1/calls", other, body); r.Status == http.StatusServiceUnavailable {
		t.Fatalf("room was not given back: %d %s", r.Status, r.Raw)
	}
}
