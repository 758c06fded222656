package stdiolines

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// Whatever line a client sends, the bridge neither panics nor goes quiet:
// a line is either passed on as one JSON-RPC message the SDK takes (an id
// it does not take stood in for by a string), or answered with one
// JSON-RPC error. CI runs it for a minute (make test, make fuzz).
func FuzzBridgeLines(f *testing.F) {
	for _, seed := range []string{`this is not json`, `{}`, `[]`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `null`, `"x"`, `1`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`, `{"jsonrpc":"1.0","id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":1}{"x":2}`, "\ufeff{}", `{"jsonrpc":"2.0","id":1e400,"method":"x"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			return // one line at a time
		}
		var replies bytes.Buffer
		out := NewWriter(&replies)
		passed, err := io.ReadAll(Guard(strings.NewReader(line+"\n"), out))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if strings.TrimSpace(line) == "" {
			if len(passed)+replies.Len() != 0 {
				t.Fatalf("a blank line gave %q %q", passed, replies.Bytes())
			}
			return
		}
		switch {
		case len(passed) > 0 && replies.Len() == 0:
			var m map[string]json.RawMessage
			if json.Unmarshal(passed, &m) != nil || string(m["jsonrpc"]) != `"2.0"` || bytes.Count(passed, []byte("\n")) != 1 {
				t.Fatalf("%q passed on as %q", line, passed)
			}
			if id, ok := m["id"]; ok && m["method"] != nil && !SDKID(id) {
				t.Fatalf("%q passed on with an id the SDK refuses: %s", line, id)
			}
		case len(passed) == 0 && replies.Len() > 0:
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(replies.Bytes(), &m) != nil || m.JSONRPC != "2.0" || m.Error == nil || m.Error.Message == "" ||
				bytes.Count(replies.Bytes(), []byte("\n")) != 1 {
				t.Fatalf("%q answered %q", line, replies.Bytes())
			}
		default:
			t.Fatalf("%q: passed %q, answered %q", line, passed, replies.Bytes())
		}
	})
}
