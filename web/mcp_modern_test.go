package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools/httptool"
)

// twoRevisions is an MCP server over streamable HTTP written by hand that
// speaks 2025-11-25 (initialize, a session) and 2026-07-28 (server/discover,
// no session), and lists otherwise to each: both_ways to both, in other
// bytes at 2026-07-28, and ask_first only at 2026-07-28. ask_first answers
// first with an input-required result, then, asked again with the answer
// and the state it gave, completes; asked with a state it did not give, it
// does not take the call (-32602). It has one prompt, ask_prompt, listed
// and answered at 2026-07-28 only, which asks first as ask_first does.
// heard keeps what each call to ask_first and each prompts/get carried.
type twoRevisions struct {
	mu        sync.Mutex
	heard     []string
	discovers int
}

const (
	bothLegacy    = `{"name":"both_ways","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
	bothModern    = `{"inputSchema":{"type":"object"},"name":"both_ways","annotations":{"readOnlyHint":true},"x-at":"2026"}`
	askFirst      = `{"name":"ask_first","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`
	inputRequired = `{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"mode":"form",` +
		`"message":"Who asks?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}},"requestState":"state-1"}`
	answered = `{"content":[{"type":"text","text":"done for ada"}],"resultType":"complete"}`
)

func (up *twoRevisions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var p struct {
		Name         string         `json:"name"`
		RequestState string         `json:"requestState"`
		Meta         map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	modern := r.Header.Get("Mcp-Protocol-Version") == "2026-07-28"
	result := ""
	switch {
	case m.Method == "initialize":
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{}},"serverInfo":{"name":"two","version":"1"}}`
	case m.Method == "server/discover":
		up.mu.Lock()
		up.discovers++
		up.mu.Unlock()
		result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{}},"resultType":"complete"}`
	case m.Method == "tools/list" && modern:
		result = `{"tools":[` + bothModern + `,` + askFirst + `],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`
	case m.Method == "tools/list":
		result = `{"tools":[` + bothLegacy + `]}`
	case m.Method == "prompts/list" && modern:
		result = `{"prompts":[{"name":"ask_prompt","x-at":"2026"}],"resultType":"complete"}`
	case m.Method == "prompts/list":
		result = `{"prompts":[]}`
	case m.Method == "prompts/get" && p.Name == "ask_prompt" && modern:
		up.mu.Lock()
		up.heard = append(up.heard, string(m.Params))
		up.mu.Unlock()
		result = inputRequired
		if p.RequestState == "state-1" {
			result = `{"messages":[{"role":"user","content":{"type":"text","text":"prompt for ada"}}],"resultType":"complete"}`
		}
	case m.Method == "tools/call" && p.Name == "both_ways":
		result = `{"content":[{"type":"text","text":"both"}]}`
	case m.Method == "tools/call" && p.Name == "ask_first" && modern:
		up.mu.Lock()
		up.heard = append(up.heard, string(m.Params))
		up.mu.Unlock()
		switch p.RequestState {
		case "":
			result = inputRequired
		case "state-1":
			result = answered
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32602,"message":"requestState failed its check"}}`))
			return
		}
	}
	msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
	if result == "" {
		msg = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no"}}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(msg))
}

// An upstream that speaks both revisions is spoken to at each: a
// 2025-11-25 session is offered what the server lists at 2025-11-25, a
// 2026-07-28 client what it lists at 2026-07-28, in those bytes; such a
// client gets the server's input-required result as sent and its answer
// reaches the server with the call asked again (a new round, not the
// first call found again), with the client's own capabilities; a state the
// server does not take is the server's own JSON-RPC error; and a caller
// that cannot answer (a 2025 session, the gate API) is not offered the
// tool or is told why it did not finish.
func TestAnUpstreamIsSpokenToAtTheClientsRevision(t *testing.T) {
	up := &twoRevisions{}
	srv := httptest.NewServer(up)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	a, key, session := oddApp(t, "mcp_servers:\n  - name: two\n    url: \""+srv.URL+"\"\n    prefix: false\n", 2)

	legacy := []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25", "Accept", "application/json, text/event-stream"}
	modern := []string{"Mcp-Protocol-Version", "2026-07-28", "Accept", "application/json, text/event-stream"}
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `}`
	listed := func(headers []string, params string) string {
		r := a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+params+`}}`, headers...)
		return resultOf(t, r.Raw)
	}
	if got := listed(legacy, ""); !strings.Contains(got, `"tools":[`+strings.TrimSuffix(bothLegacy, "}")) || strings.Contains(got, "ask_first") {
		t.Errorf("a 2025-11-25 session is offered\n%s\nnot what the server lists at 2025-11-25", got)
	}
	if got := listed(append(modern, "Mcp-Method", "tools/list"), meta); !strings.Contains(got, `"tools":[`+bothModern+`,`+askFirst+`]`) {
		t.Errorf("a 2026-07-28 client is offered\n%s\nnot what the server lists at 2026-07-28", got)
	}

	call := func(headers []string, params string) apiResp {
		return a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_first","arguments":{}`+params+`}}`, headers...)
	}
	asking := append(modern, "Mcp-Method", "tools/call", "Mcp-Name", "ask_first")
	first := resultOf(t, call(asking, ","+meta).Raw)
	if !strings.HasPrefix(first, strings.TrimSuffix(inputRequired, "}")+`,"_meta":{"countersign/receipt":`) {
		t.Errorf("the client got\n%s\nnot the server's input-required result", first)
	}
	again := resultOf(t, call(asking, `,"inputResponses":{"who":{"action":"accept","content":{"name":"ada"}}},"requestState":"state-1",`+meta).Raw)
	if !strings.HasPrefix(again, `{"content":[{"type":"text","text":"done for ada"}],"resultType":"complete","_meta":{"countersign/receipt":`) {
		t.Errorf("asked again with the answer, the client got\n%s", again)
	}
	up.mu.Lock()
	heard := append([]string(nil), up.heard...)
	up.mu.Unlock()
	if up.discovers != 1 {
		t.Errorf("Countersign discovered the server %d times: the connection at 2026-07-28 was not kept", up.discovers)
	}
	if len(heard) != 2 || !strings.Contains(heard[1], `"inputResponses":{"who":{"action":"accept","content":{"name":"ada"}}}`) ||
		!strings.Contains(heard[1], `"requestState":"state-1"`) || !strings.Contains(heard[0], caps) {
		t.Errorf("the server heard %q", heard)
	}

	tampered := call(asking, `,"inputResponses":{},"requestState":"forged",`+meta)
	if tampered.Status != http.StatusBadRequest || !strings.Contains(tampered.Raw, `"code":-32602`) || !strings.Contains(tampered.Raw, "requestState failed its check") {
		t.Errorf("a state the server does not take: %d %s", tampered.Status, tampered.Raw)
	}
	if r := call(legacy, ""); !strings.Contains(r.Raw, `"isError":true`) || !strings.Contains(r.Raw, `unknown tool \"ask_first\"`) || strings.Contains(r.Raw, "resultType") {
		t.Errorf("a 2025-11-25 session called a tool it is not offered: %s", r.Raw)
	}
	unknown := a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such","arguments":{},`+meta+`}}`,
		append(modern, "Mcp-Method", "tools/call", "Mcp-Name", "no_such")...)
	if got := resultOf(t, unknown.Raw); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, `"resultType":"complete"`) {
		t.Errorf("a 2026-07-28 client called a tool no one offers: %s", unknown.Raw)
	}
	// The gate API cannot answer the server's question: the call fails
	// and says what the server asked.
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"ask_first","args":{},"session":"api-1"}`)
	c := callOf(t, r)
	if c["status"] != "failed" || !strings.Contains(r.Raw, "asks the client for input") || !strings.Contains(r.Raw, "Who asks?") {
		t.Errorf("through the gate API: %d %s", r.Status, r.Raw)
	}
}

// A prompt the server lists only at 2026-07-28 is offered to such clients
// only; asked for it, the server's input-required result reaches the
// client, and the client's answer (and state) reaches the server when it
// asks again, with the capabilities it declared. The tools page says so.
func TestAPromptIsAskedAtTheClientsRevision(t *testing.T) {
	up := &twoRevisions{}
	srv := httptest.NewServer(up)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	a := upstreamsApp(t, "mcp_servers:\n  - name: two\n    url: \""+srv.URL+"\"\n    prefix: false\n", httptool.Options{}, time.Second)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	session := sessionOf(t, a, key)

	legacy := []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25", "Accept", "application/json, text/event-stream"}
	modern := []string{"Mcp-Protocol-Version", "2026-07-28", "Accept", "application/json, text/event-stream"}
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `}`
	send := func(headers []string, method, params string) apiResp {
		return a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":{`+params+`}}`, headers...)
	}
	if got := resultOf(t, send(legacy, "prompts/list", "").Raw); strings.Contains(got, "ask_prompt") {
		t.Errorf("a 2025-11-25 session is offered a prompt the server lists at 2026-07-28 only: %s", got)
	}
	if got := resultOf(t, send(append(modern, "Mcp-Method", "prompts/list"), "prompts/list", meta).Raw); !strings.Contains(got, `"name":"ask_prompt"`) {
		t.Errorf("a 2026-07-28 client is offered %s, not the server's prompt", got)
	}
	asking := append(modern, "Mcp-Method", "prompts/get", "Mcp-Name", "ask_prompt")
	first := resultOf(t, send(asking, "prompts/get", `"name":"ask_prompt",`+meta).Raw)
	if !strings.Contains(first, `"resultType":"input_required"`) || !strings.Contains(first, `"message":"Who asks?"`) || !strings.Contains(first, `"requestState":"state-1"`) {
		t.Errorf("asked for the prompt, the client got\n%s\nnot the server's input-required result", first)
	}
	again := resultOf(t, send(asking, "prompts/get", `"name":"ask_prompt","inputResponses":{"who":{"action":"accept","content":{"name":"ada"}}},"requestState":"state-1",`+meta).Raw)
	if !strings.Contains(again, `"text":"prompt for ada"`) || !strings.Contains(again, `"resultType":"complete"`) {
		t.Errorf("asked again with the answer, the client got\n%s", again)
	}
	// The tools page says the server is spoken to at both revisions.
	a.staff(models.Admin, "ada@x.test", "Ada")
	if _, page := a.signIn("ada@x.test").get("/tools"); !strings.Contains(page, "Spoken to at MCP 2025-11-25 and 2026-07-28") ||
		!strings.Contains(page, "1 tool listed at 2026-07-28 only.") {
		t.Errorf("the tools page does not say at which revisions the server is spoken to:\n%s", page)
	}
	up.mu.Lock()
	heard := append([]string(nil), up.heard...)
	up.mu.Unlock()
	if len(heard) != 2 || !strings.Contains(heard[0], caps) ||
		!strings.Contains(heard[1], `"inputResponses":{"who":{"action":"accept","content":{"name":"ada"}}}`) || !strings.Contains(heard[1], `"requestState":"state-1"`) {
		t.Errorf("the server heard %q", heard)
	}
}

// legacyOnly is an MCP server written by hand that speaks 2025-11-25 only
// (as server-everything does): one prompt, one resource and completions,
// each answered without the 2026-07-28 revision's resultType.
func legacyOnly(w http.ResponseWriter, r *http.Request) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := map[string]string{
		"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"prompts":{},"resources":{},"completions":{}},"serverInfo":{"name":"old","version":"1"}}`,
		"tools/list": `{"tools":[]}`, "prompts/list": `{"prompts":[{"name":"hello"}]}`,
		"prompts/get":    `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`,
		"resources/list": `{"resources":[{"uri":"old://a","name":"a"}]}`, "resources/templates/list": `{"resourceTemplates":[]}`,
		"resources/read":      `{"contents":[{"uri":"old://a","text":"A"}]}`,
		"completion/complete": `{"completion":{"values":["x1"],"total":1}}`,
	}[m.Method]
	msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
	if result == "" {
		msg = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(msg))
}

// A 2026-07-28 client reads an upstream of 2025 only: each prompt, resource
// read and completion carries the revision's resultType, and a read its
// cache words, never cached (which the SDKs of that revision require), the
// upstream's bytes otherwise as sent.
func TestA2026ClientReadsPromptsResourcesAndCompletionsOfA2025Server(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(legacyOnly))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	a := upstreamsApp(t, "mcp_servers:\n  - name: old\n    url: \""+srv.URL+"\"\n    prefix: false\n", httptool.Options{}, time.Second)
	key, _, _ := a.accounts.AddAgent(context.Background(), "bot", models.Actor{ID: "test"})
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, c := range []struct{ method, name, params, want string }{
		{"prompts/get", "hello", `"name":"hello",`, `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"resultType":"complete"`},
		{"resources/read", "old://a", `"uri":"old://a",`, `{"contents":[{"uri":"old://a","text":"A"}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"completion/complete", "", `"ref":{"type":"ref/prompt","name":"hello"},"argument":{"name":"n","value":"x"},`, `{"completion":{"values":["x1"],"total":1},"resultType":"complete"`},
	} {
		headers := []string{"Mcp-Protocol-Version", "2026-07-28", "Accept", "application/json, text/event-stream", "Mcp-Method", c.method}
		if c.name != "" {
			headers = append(headers, "Mcp-Name", c.name)
		}
		r := a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":5,"method":"`+c.method+`","params":{`+c.params+meta+`}}`, headers...)
		if got := resultOf(t, r.Raw); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s at 2026-07-28 answered\n%s\nwant it to begin\n%s", c.method, got, c.want)
		}
	}
}
