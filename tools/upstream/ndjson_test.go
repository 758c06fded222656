package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server that answers a call with its notifications and then its
// response as JSON texts one after another in an application/json body
// (NDJSON, as the reference everything-server's test_streaming_elicitation
// does) is read: the client gets the result, kept in the bytes it came
// in, and the progress notification before it. The SDK alone never
// answers the call.
func TestAnAnswerOfJSONTextsOneAfterAnotherIsRead(t *testing.T) {
	const result = `{"content":[{"type":"text","text":"streaming <done>"}],"x":{"b":1,"a":2}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"nd","version":"1"}}}`, m.ID)
		case "tools/call":
			token, _ := json.Marshal(m.Params.Meta["progressToken"])
			fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":50,\"total\":100}}\n", token)
			w.(http.Flusher).Flush()
			fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\n \"id\":%s,\"result\":%s}\n", m.ID, result)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
		}
	}))
	defer srv.Close()
	progressed := make(chan float64, 1)
	connect := func(rt http.RoundTripper) *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				select {
				case progressed <- r.Params.Progress:
				default:
				}
			}})
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: rt}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	params := &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{}}
	params.SetProgressToken("p-1")
	alone, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := connect(http.DefaultTransport).CallTool(alone, params); err == nil {
		t.Fatal("the SDK alone reads the answer: this test no longer shows anything")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cs := connect(watching{u: &Server{}, next: http.DefaultTransport})
	callCtx, kept, _ := WithResultBytes(ctx)
	res, err := cs.CallTool(callCtx, params)
	if err != nil {
		t.Fatalf("the call failed: %v", err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "streaming <done>" {
		t.Errorf("the client got %+v", res.Content)
	}
	if string(kept()) != result {
		t.Errorf("the result kept is %s, not as sent", kept())
	}
	select {
	case p := <-progressed:
		if p != 50 {
			t.Errorf("progress %v", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("the progress notification before the response was not heard")
	}
}
