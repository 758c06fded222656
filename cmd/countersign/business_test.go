package main

import (
	"io"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models/storage/storetest"
)

// --demo is the one choice of a business: it brings the shop's model, its
// policy, its tools and its prompt; without it nothing of the shop is
// there, and no model is chosen for the user: the start log says what to
// choose, and the chat's runs fail saying so.
func TestTheDemoIsOneChoice(t *testing.T) {
	if m, err := newModel(config{Demo: true}); err != nil || m != demo.Shop.Model {
		t.Errorf("--demo's model: %T %v", m, err)
	}
	if m, err := newModel(config{}); err != nil || m != llm.Model(llm.None{}) {
		t.Errorf("no --demo, no --model: %T %v", m, err)
	}
	if src := sources(config{}, nil); src.BuiltIn != nil || src.Extra != nil {
		t.Errorf("without --demo the shop's policy or tools are there: %+v", src)
	}
	if p, _ := systemPrompt(config{}); p != "" {
		t.Errorf("without --demo the prompt is %q", p)
	}
	var log lockedBuffer
	serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t)}, io.Discard, &log)
	if !strings.Contains(log.String(), "no --model: Countersign's own chat answers nobody until you choose --model openai or anthropic") {
		t.Errorf("the start log does not say what to choose:\n%s", log.String())
	}
	if _, err := (llm.None{}).Next(t.Context(), llm.Request{}); err == nil || !strings.Contains(err.Error(), "--model openai, anthropic or offline") {
		t.Errorf("the chat's runs fail with %v", err)
	}
}
