package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// `serve` with --webhook (two, from the environment) and --public-url
// tells both receivers of an action that waits, signed, with a link to
// the action at the public address; a webhook without a secret, or a
// Slack signing secret with nothing posting messages, is refused at start.
func TestServeTellsWebhooks(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], r.Header.Get("X-Countersign-Event")+" "+r.Header.Get("X-Countersign-Signature")+" "+string(body))
		mu.Unlock()
	}))
	defer srv.Close()
	dir := t.TempDir()
	out, code := runCmd(t, "serve", "--db", filepath.Join(dir, "a.db"), "--addr", "127.0.0.1:0", "--webhook", srv.URL)
	if code == 0 || !strings.Contains(out, "--webhook-secret") {
		t.Fatalf("a webhook without a secret: %d\n%s", code, out)
	}
	out, code = runCmd(t, "serve", "--db", filepath.Join(dir, "b.db"), "--addr", "127.0.0.1:0", "--slack-signing-secret", "x")
	if code == 0 || !strings.Contains(out, "--slack-webhook or --slack-token") {
		t.Fatalf("a signing secret alone: %d\n%s", code, out)
	}

	out, code = runCmd(t, "serve", "--db", filepath.Join(dir, "c.db"), "--addr", "127.0.0.1:0", "--webhook", srv.URL, "--webhook-secret", "s",
		"--webhook-events", "action.pending call.done")
	if code == 0 || !strings.Contains(out, `no event type "call.done"`) {
		t.Fatalf("an unknown event type: %d\n%s", code, out)
	}

	t.Setenv("COUNTERSIGN_WEBHOOK", srv.URL+"/one "+srv.URL+"/two")
	t.Setenv("COUNTERSIGN_WEBHOOK_SECRET", "whsec")
	t.Setenv("COUNTERSIGN_WEBHOOK_EVENTS", "action.pending action.decided")
	var cfg config
	fs, c := newFlagSet("serve", io.Discard)
	c.reachFlags(fs)
	if err := parse(fs, []string{"--public-url", "https://cs.example/"}); err != nil {
		t.Fatal(err)
	}
	cfg.Reach, cfg.Addr, cfg.DB, cfg.Demo = c.Reach, "127.0.0.1:0", storetest.DSN(t), true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app, err := NewApp(ctx, cfg, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	run := models.NewID("run")
	if err := app.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "test", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	read, err := app.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_alice", Channel: "test", Tool: "get_order_status",
		Args: []byte(`{"order_id":"A1001"}`)})
	if err != nil || read.Status != models.CallSucceeded {
		t.Fatalf("read: %+v %v", read, err)
	}
	if ds, err := app.store.DeliveriesAbout(ctx, read.CallID); err != nil || len(ds) != 0 {
		t.Fatalf("call.finished was queued though the webhooks hear only actions: %+v %v", ds, err)
	}
	call, err := app.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_alice", Channel: "test", Tool: "issue_refund",
		Args: []byte(`{"order_id":"A1001","amount":100}`)})
	if err != nil || call.Status != models.CallPending {
		t.Fatalf("refund: %+v %v", call, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		one, two := got["/one"], got["/two"]
		mu.Unlock()
		if len(one) > 0 && len(two) > 0 {
			event, rest, _ := strings.Cut(one[0], " ")
			sig, body, _ := strings.Cut(rest, " ")
			var ev struct {
				Action struct{ URL string } `json:"action"`
			}
			_ = json.Unmarshal([]byte(body), &ev)
			if event != "action.pending" || !strings.HasPrefix(sig, "t=") || ev.Action.URL != "https://cs.example/actions/"+call.CallID {
				t.Fatalf("delivered: %s", one[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
