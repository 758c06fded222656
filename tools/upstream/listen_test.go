package upstream

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A listen stream sent as application/json texts one after another is
// read as the events of a stream, each text as soon as it has come (the
// stream stays open), a text over several lines as one event.
func TestAListenStreamOfJSONTextsIsReadAsItComes(t *testing.T) {
	pr, pw := io.Pipe()
	resp := listenAnswer(&http.Response{Header: http.Header{"Content-Type": {"application/json"}}, Body: pr, ContentLength: 10})
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.ContentLength != -1 {
		t.Fatalf("headers %v, length %d", resp.Header, resp.ContentLength)
	}
	events := bufio.NewReader(resp.Body)
	next := func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			var ev strings.Builder
			for {
				line, err := events.ReadString('\n')
				if err != nil || line == "\n" {
					got <- ev.String()
					return
				}
				ev.WriteString(line)
			}
		}()
		select {
		case ev := <-got:
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("an event that came was not read while the stream stays open")
			return ""
		}
	}
	go pw.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"}` + "\n\n"))
	if ev := next(); ev != "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\"}\n" {
		t.Fatalf("first event %q", ev)
	}
	go pw.Write([]byte("{\"jsonrpc\":\"2.0\",\r\n \"method\":\"notifications/tools/list_changed\"}\n"))
	if ev := next(); ev != "event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata:  \"method\":\"notifications/tools/list_changed\"}\n" {
		t.Fatalf("a text over two lines: %q", ev)
	}
	go func() { pw.Write([]byte(`{"half":`)); pw.Close() }()
	if n, err := resp.Body.Read(make([]byte, 10)); n != 0 || err != io.ErrUnexpectedEOF {
		t.Fatalf("a stream that ends inside a text: %d %v", n, err)
	}
}
