package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// oddResult is a tool result as no Go encoder would write it: unknown keys
// at every level, keys out of order, escapes where none are needed (and
// <, > and & where Go would escape them), U+2028, numbers as written,
// every content type, and Countersign's own stand-in key as text.
const oddResult = `{"unknownTop":{"keep":"me"},"content":[` +
	`{"type":"text","text":"<b>&amp;</b> \u00e9 \u2028 ☕ see countersign/answer","x-vendor":{"z":1,"a":2}},` +
	`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","annotations":{"priority":0.50}},` +
	`{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},` +
	`{"type":"resource_link","uri":"file:///a.txt","name":"a","size":1000},` +
	`{"type":"resource","resource":{"uri":"file:///b","mimeType":"text/plain","text":"b<>","_meta":{"k":"\/"}}}],` +
	`"structuredContent":{"zeta":1,"alpha":"<&>","nested":{"b":[1,2.50,-0,1e3],"a":null}},` +
	`"_meta":{"vendor/z":true,"vendor/a":"\u003c"}}`

// oddTools are tools as the odd upstream lists them: not by name, keys in
// no order, ones no SDK knows, JSON Schema 2020-12 keywords, escapes, one
// tool's own word on tasks.
var oddTools = []string{
	`{"name":"odd_sse","title":"Odd \u00e9","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"execution":{"taskSupport":"forbidden"}}`,
	`{"inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"s":{"type":"string","pattern":"^<\\w+>$"}},` +
		`"properties":{"q":{"$ref":"#/$defs/s"}},"additionalProperties":false},"name":"odd_json","x-vendor":{"b":"<keep>","a":1.50},` +
		`"annotations":{"readOnlyHint":true,"idempotentHint":true}}`,
}

// oddUpstream is an MCP server over streamable HTTP written by hand, so
// that every byte of its answers is the test's: odd_json answers as one
// JSON body, odd_sse as an event stream with the result spread over lines,
// after a response to a request never made.
func oddUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{"error":{"code":-32601,"message":"no"}}`
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"odd","version":"1"}}`
		case "tools/list":
			result = `{"tools":[` + oddTools[0] + `,` + oddTools[1] + `]}`
		case "tools/call":
			result = oddResult
		}
		msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
		if m.Params.Name != "odd_sse" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(msg))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		spread := strings.ReplaceAll(strings.ReplaceAll(msg, `,"structuredContent"`, ",\n  \"structuredContent\""), `,"_meta"`, ",\n\t\"_meta\"")
		// A lying peer first: a response to a request never made, which
		// is not this call's result.
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"decoy\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"not this\"}]}}\n\n"))
		_, _ = w.Write([]byte("event: message\ndata: " + strings.ReplaceAll(spread, "\n", "\ndata: ") + "\n\n"))
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// resultOf is the result of the JSON-RPC response in an answer of /mcp (a
// JSON body or an event stream), in the bytes it came in.
func resultOf(t *testing.T, body string) string {
	t.Helper()
	msg := body
	if !strings.HasPrefix(strings.TrimSpace(body), "{") {
		msg = ""
		for _, event := range strings.Split(body, "\n\n") {
			var data []string
			for _, line := range strings.Split(event, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					data = append(data, d)
				}
			}
			if joined := strings.Join(data, "\n"); strings.Contains(joined, `"result"`) {
				msg = joined
			}
		}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &m); err != nil || m.Result == nil {
		t.Fatalf("no result in %q", body)
	}
	return string(m.Result)
}

// An upstream's result reaches the client byte for byte as the upstream
// sent it, over a JSON answer or an event stream, for a 2025-11-25
// session and a 2026-07-28 client alike: Countersign's only word is the
// signed receipt, added last in _meta, and the 2026 revision's own words
// (the server's name in _meta, resultType) after it.
func TestAnUpstreamsResultPassesByteForByte(t *testing.T) {
	up := oddUpstream(t)
	a, key, session := oddApp(t, "mcp_servers:\n  - name: odd\n    url: \""+up.URL+"\"\n    prefix: false\n", 2)

	// The tools as the upstream listed them, in its order; a 2025-11-25 session is told
	// that a tool may be called as a task where the tool did not say.
	modern := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list", "Accept", "application/json, text/event-stream"}
	const declared = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for client, r := range map[string]apiResp{
		"2025-11-25": a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, "Mcp-Session-Id", session,
			"Mcp-Protocol-Version", "2025-11-25", "Accept", "application/json, text/event-stream"),
		"2026-07-28": a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+declared+`}}`, modern...),
	} {
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal([]byte(resultOf(t, r.Raw)), &list); err != nil || len(list.Tools) != 2 {
			t.Fatalf("%s: tools/list: %v %s", client, err, r.Raw)
		}
		want := slices.Clone(oddTools)
		if client == "2025-11-25" {
			want[1] = strings.TrimSuffix(want[1], "}") + `,"execution":{"taskSupport":"optional"}}`
		}
		for i := range want {
			if string(list.Tools[i]) != want[i] {
				t.Errorf("%s: the tool is listed as\n%s\nthe upstream listed it as\n%s", client, list.Tools[i], want[i])
			}
		}
	}

	for _, tool := range []string{"odd_json", "odd_sse"} {
		want := oddResult
		if tool == "odd_sse" {
			want = strings.ReplaceAll(strings.ReplaceAll(want, `,"structuredContent"`, ",\n  \"structuredContent\""), `,"_meta"`, ",\n\t\"_meta\"")
		}
		answeredAsSent(t, a, key, session, tool, want)
	}
}

// answeredAsSent calls tool through /mcp on a 2025-11-25 session and as a
// 2026-07-28 client, and checks that each got want, the upstream's result,
// byte for byte: Countersign's only word the signed receipt, last in
// _meta, and the 2026 revision's own words after it.
func answeredAsSent(t *testing.T, a *app, key, session, tool, want string) {
	t.Helper()
	receipt := regexp.MustCompile(`,"countersign/receipt":"[A-Za-z0-9_.-]+"`)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	for _, c := range []struct {
		client  string
		headers []string
		msg     string
		words   string // what the revision adds after the receipt
	}{
		// A client that names a place of its own for the answer is
		// not heard: Countersign names it.
		{"2025-11-25", []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25", "X-Countersign-Answer", "guessed"}, call, `}}`},
		{"2026-07-28", []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool},
			strings.Replace(call, `"arguments":{}`, `"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
				`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`, 1),
			`,"io.modelcontextprotocol/serverInfo":{"name":"countersign","version":"1"}},"resultType":"complete"}`},
	} {
		r := a.doWith("POST", "/mcp", key, c.msg, append(c.headers, "Accept", "application/json, text/event-stream")...)
		got := resultOf(t, r.Raw)
		signed := receipt.FindString(got)
		if signed == "" || !strings.HasSuffix(got, signed+c.words) {
			t.Errorf("%s, %s: no receipt at the end of _meta, then %s:\n%.2000s", tool, c.client, c.words, got)
			continue
		}
		if unsigned := strings.TrimSuffix(got, signed+c.words) + "}}"; unsigned != want {
			at := 0
			for at < len(unsigned) && at < len(want) && unsigned[at] == want[at] {
				at++
			}
			t.Errorf("%s, %s: from byte %d, the client got\n%.300q\nthe upstream sent\n%.300q", tool, c.client, at, unsigned[at:], want[at:])
		}
	}
}

// sessionOf is a 2025-11-25 session of /mcp, opened by hand.
func sessionOf(t *testing.T, a *app, key string) string {
	t.Helper()
	hello := a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		"Accept", "application/json, text/event-stream")
	session := hello.Header.Get("Mcp-Session-Id")
	if hello.Status != 200 || session == "" {
		t.Fatalf("initialize: %d %s", hello.Status, hello.Raw)
	}
	a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", session,
		"Mcp-Protocol-Version", "2025-11-25", "Accept", "application/json, text/event-stream")
	return session
}

// bigOddResult is oddResult with a text block of some 240 KB first, more
// than Countersign decodes of a stdio server's result.
var bigOddResult = strings.Replace(oddResult, `"content":[`,
	`"content":[{"type":"text","text":"`+strings.Repeat(`\u00e9<&>\/ \"`, 20000)+`"},`, 1)

// bigOddLines is bigOddResult over three lines, as one message (JSON's
// white space). Line feeds only: an event stream cannot carry a carriage
// return (a client joins an event's data lines with line feeds).
var bigOddLines = strings.Replace(strings.Replace(bigOddResult, `,"_meta"`, ",\n\"_meta\"", 1), `,"structuredContent"`, ",\n \"structuredContent\"", 1)

// oddOverStdio runs this test binary as an MCP server over stdio written
// by hand (COUNTERSIGN_TEST_ODD_STDIO set), so that every byte of its
// answers is the test's: odd_json answers with oddResult, odd_big with
// bigOddResult, odd_big_lines with bigOddLines, odd_big_error with a big
// error.
func oddOverStdio() bool {
	if os.Getenv("COUNTERSIGN_TEST_ODD_STDIO") == "" {
		return false
	}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return true
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
			continue
		}
		result := `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"odd","version":"1"}}`
		switch {
		case m.Method == "tools/list":
			result = `{"tools":[{"name":"odd_json","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
				`{"name":"odd_big","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
				`{"name":"odd_big_error","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
				`{"name":"odd_big_lines","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`
		case m.Method == "tools/call" && m.Params.Name == "odd_json":
			result = oddResult
		case m.Method == "tools/call" && m.Params.Name == "odd_big":
			result = bigOddResult
		case m.Method == "tools/call" && m.Params.Name == "odd_big_lines":
			result = bigOddLines
		case m.Method == "tools/call":
			result = `{"content":[{"type":"text","text":"the big failure ` + strings.Repeat("x", 100<<10) + `"}],"isError":true}`
		}
		fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", m.ID, result)
	}
}

// Over stdio too, an upstream's result reaches the client byte for byte,
// a big one (which Countersign does not decode) as a small one; a big
// error is still an error.
func TestAStdioUpstreamsResultPassesByteForByte(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, key, session := oddApp(t, `mcp_servers:
  - name: odd
    command: "`+self+`"
    args: ["-test.run=^$"]
    env: {COUNTERSIGN_TEST_ODD_STDIO: "1"}
    prefix: false
`, 4)
	answeredAsSent(t, a, key, session, "odd_json", oddResult)
	answeredAsSent(t, a, key, session, "odd_big", bigOddResult)
	answeredAsSent(t, a, key, session, "odd_big_lines", bigOddLines)

	r := a.doWith("POST", "/mcp", key, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"odd_big_error","arguments":{}}}`,
		"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25", "Accept", "application/json, text/event-stream")
	var failed struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(resultOf(t, r.Raw)), &failed); err != nil || !failed.IsError ||
		len(failed.Content) == 0 || !strings.Contains(failed.Content[0].Text, "the big failure") {
		t.Errorf("a big error is answered as\n%.500s", r.Raw)
	}
	// Each is recorded as it ended: two results of each kind (2025 and
	// 2026), the error as a failure, with the upstream's words.
	ctx := context.Background()
	for tool, want := range map[string]string{"odd_json": oddResult, "odd_big": bigOddResult, "odd_big_lines": bigOddLines} {
		calls, _ := a.store.AuditCalls(ctx, models.AuditQuery{Tool: tool, Status: models.CallSucceeded, Limit: 10})
		if len(calls) != 2 || calls[0].Result != want || calls[1].Result != want {
			t.Errorf("%s: %d calls succeeded, the result recorded is not the upstream's bytes", tool, len(calls))
		}
	}
	calls, _ := a.store.AuditCalls(ctx, models.AuditQuery{Tool: "odd_big_error", Limit: 10})
	if len(calls) != 1 || calls[0].Status != models.CallFailed || !strings.Contains(calls[0].Error, "the big failure") {
		for _, c := range calls {
			t.Errorf("the big error is recorded as %s: %.200s", c.Status, c.Error)
		}
		if len(calls) != 1 {
			t.Errorf("%d calls of the big error are recorded", len(calls))
		}
	}
}

// oddApp serves the odd upstream of the tools file given, which offers n
// tools, and opens a 2025-11-25 session for an agent.
func oddApp(t *testing.T, toolsFile string, n int) (a *app, key, session string) {
	t.Helper()
	set, err := httptool.Load([]byte(toolsFile), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	go set.Keep() // reconnects, as the core keeps the set in force
	reg, err := tools.NewRegistry(set.Tools()...)
	if err != nil || len(reg.All()) != n {
		t.Fatalf("tools: %v %v", err, reg)
	}
	a = mcpApp(t, reg, nil, time.Second)
	key, _, _ = a.accounts.AddAgent(context.Background(), "exact", models.Actor{ID: "test"})
	return a, key, sessionOf(t, a, key)
}

// A task's result (tasks/result, 2025-11-25) is the upstream's result as
// it sent it too, Countersign's words (the receipt, the task it belongs
// to) added last in its _meta.
func TestATasksResultPassesByteForByte(t *testing.T) {
	up := oddUpstream(t)
	a, key, session := oddApp(t, "mcp_servers:\n  - name: odd\n    url: \""+up.URL+"\"\n    prefix: false\n", 2)
	send := func(msg string) string {
		return resultOf(t, a.doWith("POST", "/mcp", key, msg, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25",
			"Accept", "application/json, text/event-stream").Raw)
	}
	var made struct {
		Task struct {
			TaskID, Status string
		}
	}
	if err := json.Unmarshal([]byte(send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"odd_json","arguments":{},"task":{}}}`)), &made); err != nil ||
		made.Task.Status != "completed" {
		t.Fatalf("the task: %+v %v", made, err)
	}
	got := send(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + made.Task.TaskID + `"}}`)
	words := regexp.MustCompile(`,"countersign/receipt":"[A-Za-z0-9_.-]+","io.modelcontextprotocol/related-task":\{"taskId":"` + made.Task.TaskID + `"\}\}\}$`)
	if !words.MatchString(got) || words.ReplaceAllString(got, "}}") != oddResult {
		t.Errorf("tasks/result gave\n%.2000s\nnot the upstream's result as sent, then the receipt and the task", got)
	}
}
