package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web/mcpgate"
)

// bridgeTools are the tools the odd server lists, not by name, as no Go
// encoder writes them: keys out of order, ones no SDK knows, a JSON Schema
// 2020-12 schema, escapes where none are needed, and <, > and & where Go
// escapes them.
var bridgeTools = []string{
	`{"name":"zz_odd","inputSchema":{"type":"object","$defs":{"s":{"pattern":"^<\\w+>$"}},"additionalProperties":false},"x-vendor":{"b":"<&>","a":1.50},"annotations":{"readOnlyHint":true}}`,
	`{"annotations":{"readOnlyHint":true},"title":"Big \u00e9","name":"aa_big","inputSchema":{"type":"object"}}`,
}

// bridgeResult is the odd server's result: unknown keys at every level,
// keys out of order, escapes, U+2028, numbers as written, a line break
// between members (JSON's white space), and each content type.
const bridgeResult = `{"unknownTop":{"keep":"me"},"content":[` +
	`{"type":"text","text":"<b>&amp;</b> \u00e9 \u2028 \/ countersign/answer","x-vendor":{"z":1,"a":2}},` +
	`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","annotations":{"priority":0.50}},` +
	`{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},` +
	`{"type":"resource_link","uri":"file:///a.txt","name":"a"},` +
	`{"type":"resource","resource":{"uri":"file:///b","text":"b<>"}}],` + "\n\t" +
	`"structuredContent":{"zeta":1,"alpha":"<&>","n":[2.50,-0,1e3]},"_meta":{"vendor/z":true,"vendor/a":"\u003c"}}`

// bigBridgeResult is bridgeResult with 200 KB more text: more than the
// bridge hands its SDK to decode.
var bigBridgeResult = strings.Replace(bridgeResult, `"content":[`, `"content":[{"type":"text","text":"`+strings.Repeat(`\u00e9<&> `, 20000)+`"},`, 1)

// bridgePrompt and bridgeRead are the odd server's prompt and resource,
// as no Go encoder writes them.
const (
	bridgePrompt = `{"x-top":{"b":1,"a":2},"messages":[{"role":"user","content":{"type":"text","text":"<&> \u00e9"}}]}`
	bridgeRead   = `{"contents":[{"uri":"file:///odd.txt","text":"<&>\u2028","x-v":1.50}]}`
	// as listed
	bridgePromptListed = `{"x-k":"<\/","name":"odd_prompt","arguments":[{"name":"who","x-a":1}]}`
	bridgeResource     = `{"uri":"file:///odd.txt","x-r":"\u00e9","name":"odd"}`
)

// bridgeUpstream is an MCP server over HTTP, written by hand, that speaks
// 2025-11-25 and answers with bridgeTools and, for aa_big, bigBridgeResult,
// else bridgeResult.
func bridgeUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		result := ""
		switch {
		case m.Method == "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{},"resources":{"subscribe":true},"completions":{}},"serverInfo":{"name":"odd","version":"1"}}`
		case m.Method == "prompts/list":
			result = `{"prompts":[` + bridgePromptListed + `]}`
		case m.Method == "prompts/get":
			result = bridgePrompt
		case m.Method == "resources/list":
			result = `{"resources":[` + bridgeResource + `]}`
		case m.Method == "resources/templates/list":
			result = `{"resourceTemplates":[]}`
		case m.Method == "resources/read":
			result = bridgeRead
		case m.Method == "resources/subscribe":
			result = `{}`
		case m.Method == "completion/complete":
			result = bridgeCompletion
		case m.Method == "tools/list":
			result = `{"tools":[` + strings.Join(bridgeTools, ",") + `]}`
		case m.Method == "tools/call" && m.Params.Name == "aa_big":
			result = bigBridgeResult
		case m.Method == "tools/call":
			result = bridgeResult
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bridgeLines starts countersign mcp against the app; send writes one line
// to it and returns the next line it writes.
func bridgeLines(t *testing.T, addr, key string) (send func(line string) string) {
	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() {
		_ = run(ctx, []string{"mcp", "--url", "http://" + addr, "--agent-key", key}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	lines := bufio.NewReader(clientIn)
	return func(line string) string {
		t.Helper()
		if _, err := io.WriteString(clientOut, line+"\n"); err != nil {
			t.Fatalf("the bridge stopped reading: %v", err)
		}
		if strings.Contains(line, `"method":"notifications/`) {
			return ""
		}
		got := make(chan string, 1)
		go func() {
			s, _ := lines.ReadString('\n')
			got <- s
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to %.200s", line)
		}
		return ""
	}
}

// What the server lists and answers reaches a client of the stdio bridge
// in the server's bytes, as it reaches a client of /mcp: the upstream's
// tools as it listed them (no word on tasks, which the bridge does not
// speak), and its results with the signed receipt last in _meta, for a
// 2025-11-25 client and a 2026-07-28 one (which also gets its revision's
// words), small or big. A line break in a result becomes a space: one
// message a line.
func TestTheBridgePassesTheServersBytes(t *testing.T) {
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsFile, []byte("tools:\n  - name: look\n    risk: read\n    http: {method: GET, url: \"http://127.0.0.1:9/look\"}\n"+
		"mcp_servers:\n  - name: odd\n    url: \""+bridgeUpstream(t)+"\"\n    prefix: false\n"), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	key = strings.TrimSpace(key)

	const modern = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	receipt := regexp.MustCompile(`,"countersign/receipt":"[A-Za-z0-9_.-]+"`)
	for _, c := range []struct {
		client, hello, meta, words string
	}{
		{"2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			"", `}}`},
		{"2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modern + `}}`,
			modern, `,"io.modelcontextprotocol/serverInfo":{"name":"countersign","version":"1"}},"resultType":"complete"}`},
	} {
		send := bridgeLines(t, app.Addr(), key)
		if hello := send(c.hello); !strings.Contains(hello, `"result"`) {
			t.Fatalf("%s: %s", c.client, hello)
		}
		if c.meta == "" {
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		}
		params := func(more string) string {
			if c.meta == "" {
				return "{" + more + "}"
			}
			if more == "" {
				return "{" + c.meta + "}"
			}
			return "{" + more + "," + c.meta + "}"
		}
		var list struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		line := send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":` + params("") + `}`)
		if err := json.Unmarshal([]byte(line), &list); err != nil || len(list.Result.Tools) != 3 {
			t.Fatalf("%s: tools/list: %v %s", c.client, err, line)
		}
		// The 2026-07-28 revision's cache words go to its clients only.
		if cached := strings.Contains(line, `"ttlMs"`) || strings.Contains(line, `"cacheScope"`); cached != (c.meta != "") {
			t.Errorf("%s: tools/list with cache words %v: %.300s", c.client, cached, line)
		}
		for i, want := range bridgeTools {
			if got := string(list.Result.Tools[i+1]); got != want {
				t.Errorf("%s: the bridge lists\n%s\nthe server listed\n%s", c.client, got, want)
			}
		}
		for _, tool := range []struct{ name, want string }{{"zz_odd", bridgeResult}, {"aa_big", bigBridgeResult}} {
			line := send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params(`"name":"`+tool.name+`","arguments":{}`) + `}`)
			var m struct {
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal([]byte(line), &m) != nil || m.Result == nil || strings.Count(line, "\n") != 1 {
				t.Fatalf("%s, %s: %.500s", c.client, tool.name, line)
			}
			got, want := string(m.Result), strings.ReplaceAll(tool.want, "\n", " ")
			signed := receipt.FindString(got)
			if signed == "" || !strings.HasSuffix(got, signed+c.words) {
				t.Errorf("%s, %s: no receipt at the end of _meta, then %s:\n%.300s", c.client, tool.name, c.words, got[max(0, len(got)-300):])
				continue
			}
			if unsigned := strings.TrimSuffix(got, signed+c.words) + "}}"; unsigned != want {
				at := 0
				for at < len(unsigned) && at < len(want) && unsigned[at] == want[at] {
					at++
				}
				t.Errorf("%s, %s: from byte %d, the client got\n%.300q\nthe server sent\n%.300q", c.client, tool.name, at, unsigned[at:], want[at:])
			}
		}
	}
}

// bridgeCompletion is the server's answer to completion/complete: keys in
// its own order, one no SDK knows, escapes the SDK would write otherwise.
const bridgeCompletion = `{"total":2,"completion":{"values":["ada <&>","a\u00e9"],"total":2,"hasMore":false},"x-odd":[1.50]}`

// What a server offers besides tools reaches a client of the bridge as it
// reaches a client of /mcp: its prompts and resources listed, completions,
// subscriptions, and a prompt, a resource read and a completion in the
// bytes the server sent, through /mcp and through the bridge alike.
func TestTheBridgePassesPromptsAndResources(t *testing.T) {
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: odd\n    url: \""+bridgeUpstream(t)+"\"\n    prefix: false\n"), 0o600)
	db := storetest.DSN(t)
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile}, io.Discard, io.Discard)
	key, _ := runCmd(t, "agent", "add", "--name", "desk", "--db", db)
	key = strings.TrimSpace(key)
	send := bridgeLines(t, app.Addr(), key)
	hello := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	for _, want := range []string{`"prompts":{`, `"resources":{`, `"subscribe":true`, `"completions":{}`} {
		if !strings.Contains(hello, want) {
			t.Errorf("the bridge does not declare %s: %s", want, hello)
		}
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	result := func(line string) string {
		var m struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Result == nil {
			t.Fatalf("no result: %.500s", line)
		}
		return string(m.Result)
	}
	post := rawMCP(t, app.Addr(), key)
	// Listed, without the 2026-07-28 revision's cache words, through the
	// bridge and from /mcp.
	for via, ask := range map[string]func(string) string{"the bridge": send, "/mcp": post} {
		if got := result(ask(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","params":{}}`)); got != `{"prompts":[`+bridgePromptListed+`]}` {
			t.Errorf("prompts/list through %s: %s", via, got)
		}
		if got := result(ask(`{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{}}`)); got != `{"resources":[`+bridgeResource+`]}` {
			t.Errorf("resources/list through %s: %s", via, got)
		}
		if got := result(ask(`{"jsonrpc":"2.0","id":7,"method":"resources/templates/list","params":{}}`)); strings.Contains(got, "ttlMs") {
			t.Errorf("resources/templates/list through %s: %s", via, got)
		}
	}
	if got := result(send(`{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"file:///odd.txt"}}`)); got != "{}" {
		t.Errorf("resources/subscribe through the bridge: %s", got)
	}
	// As /mcp answers a client of its own.
	for _, c := range []struct{ method, params, want string }{
		{"prompts/get", `{"name":"odd_prompt","arguments":{}}`, bridgePrompt},
		{"resources/read", `{"uri":"file:///odd.txt"}`, bridgeRead},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"odd_prompt"},"argument":{"name":"who","value":"a"}}`, bridgeCompletion},
	} {
		bridged := result(send(`{"jsonrpc":"2.0","id":6,"method":"` + c.method + `","params":` + c.params + `}`))
		direct := result(post(`{"jsonrpc":"2.0","id":6,"method":"` + c.method + `","params":` + c.params + `}`))
		if bridged != c.want || direct != c.want {
			t.Errorf("%s: through the bridge\n%s\nfrom /mcp\n%s\nthe server sent\n%s", c.method, bridged, direct, c.want)
		}
	}
}

// rawMCP opens a 2025-11-25 session of /mcp by hand; post sends one
// message on it and returns the response as sent (the data of an event).
func rawMCP(t *testing.T, addr, key string) (post func(msg string) string) {
	session := ""
	post = func(msg string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(msg))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		body, _ := io.ReadAll(resp.Body)
		var data []string
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
		if len(data) == 0 {
			return string(body)
		}
		return strings.Join(data, "\n")
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return post
}

// A result whose request the client cancelled is never written: it is let
// go once it has waited keptFor, and a fresh one waits.
func TestAResultNeverWrittenIsLetGo(t *testing.T) {
	as := newAnswers()
	as.by.Store("old", kept{[]byte(`{"content":[]}`), time.Now().Add(-keptFor - time.Minute)})
	fresh := as.keep([]byte(`{"content":[]}`))[mcpgate.MetaAnswer].(string)
	if _, ok := as.take("old"); ok {
		t.Error("a result that waited past keptFor is still kept")
	}
	if b, ok := as.take(fresh); !ok || string(b) != `{"content":[]}` {
		t.Errorf("a fresh result: %q %v", b, ok)
	}
}
