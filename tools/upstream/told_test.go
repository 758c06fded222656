package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A hostile server that says its tool list changed a thousand times at
// once is asked for its list a few times, not a thousand (one at a time,
// once more after), and Countersign's clients are told as often (the
// first listing, on connecting, is a change, not a telling).
func TestAServerSayingItsListChangedOverAndOverIsAskedAFewTimes(t *testing.T) {
	var lists atomic.Int64
	initialized := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the server's own stream to its client
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-initialized:
			case <-r.Context().Done():
				return
			}
			for range 1000 {
				fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(m.ID) == 0 {
			if m.Method == "notifications/initialized" {
				initialized <- struct{}{}
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		switch m.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"loud","version":"1"}}}`, m.ID)
		case "tools/list":
			lists.Add(1)
			time.Sleep(20 * time.Millisecond)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"look","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}`, m.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
		}
	}))
	defer srv.Close()
	var changed, told atomic.Int64
	same := func(s string) string { return s }
	u, err := New(Spec{Name: "loud", URL: srv.URL}, Config{Env: func(s string) (string, error) { return s, nil }, Redact: same,
		RedactJSON: func(b []byte) []byte { return b }, Taken: func(string) bool { return false }, At: same,
		Changed: func() { changed.Add(1) }, Told: func(Told) { told.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for deadline := time.Now().Add(10 * time.Second); lists.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // what is still to come comes
	// One at a time, once more after: far fewer than the notices, however
	// slowly this machine reads them.
	if n := lists.Load(); n < 2 || n > 20 {
		t.Fatalf("the server said its list changed 1000 times: asked for it %d times (the first on connecting)", n)
	}
	if n := told.Load(); n < 1 || n >= lists.Load() || changed.Load() != 1 { // the one change: connecting
		t.Fatalf("clients told %d times, %d changes", n, changed.Load())
	}
}
