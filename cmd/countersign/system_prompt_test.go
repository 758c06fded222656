package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The model of a run is told the neutral prompt by default, the demo
// shop's with --demo, and a business's own with --system-prompt FILE
// (through a real OpenAI client, to an OpenAI-compatible endpoint that
// records what it was told); a bad file stops the start with why.
func TestTheSystemPromptIsTheOperatorsChoice(t *testing.T) {
	var mu sync.Mutex
	var told []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		if len(req.Messages) > 0 && (req.Messages[0].Role == "system" || req.Messages[0].Role == "developer") {
			b, _ := json.Marshal(req.Messages[0].Content)
			told = append(told, string(b))
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello."}}]}`)
	}))
	defer model.Close()
	dir := t.TempDir()
	own := filepath.Join(dir, "prompt.txt")
	os.WriteFile(own, []byte("You answer for Acme Plumbing.\n"), 0o600)
	lastTold := func(cfg config) string {
		t.Helper()
		cfg.Addr, cfg.DB, cfg.Model, cfg.ModelBaseURL, cfg.ModelAPIKey = "127.0.0.1:0", storetest.DSN(t), "openai", model.URL+"/v1", "k"
		app := serveApp(t, cfg, io.Discard)
		if status, out := apiDo(t, "POST", "http://"+app.Addr()+"/api/v1/runs", "", `{"message":"hello"}`); status != 201 {
			t.Fatalf("a run: %d %v", status, out)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(told) == 0 {
			t.Fatal("the model was asked nothing")
		}
		return told[len(told)-1]
	}
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	if got := lastTold(config{}); got != quoted(runloop.DefaultSystemPrompt) || strings.Contains(got, "shop") {
		t.Errorf("by default the model was told %s", got)
	}
	if got := lastTold(config{Demo: true}); got != quoted(shop.SystemPrompt) {
		t.Errorf("with --demo the model was told %s", got)
	}
	if got := lastTold(config{SystemPrompt: own}); got != quoted("You answer for Acme Plumbing.") {
		t.Errorf("with --system-prompt the model was told %s", got)
	}
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	for file, want := range map[string]string{empty: "is empty", filepath.Join(dir, "missing.txt"): "no such file"} {
		if out, code := runCmd(t, "serve", "--db", storetest.DSN(t), "--system-prompt", file); code != 2 || !strings.Contains(out, want) {
			t.Errorf("--system-prompt %s: %d %s", file, code, out)
		}
	}
}
