package upstream

import (
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// An HTTP server's big answer to a call, sent as one JSON message, reaches
// the SDK with a stand-in for its result, and the result is kept as it
// came; an answer that is small, an error result, another call's or an
// error reaches the SDK as it came.
func TestAnHTTPServersBigJSONAnswerIsKeptAndTheSDKGetsAStandIn(t *testing.T) {
	big := strings.Repeat(`\u00e9<&>`, lightFrom/8)
	result := `{"content":[{"type":"text","text":"` + big + `"}] ,"resultType":"complete","x":{"k":[1]}}`
	read := func(id, body string) (string, *rawResult) {
		t.Helper()
		raw := &rawResult{id: []byte(id)}
		got, err := io.ReadAll(&jsonBody{ReadCloser: io.NopCloser(strings.NewReader(body)), raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		return string(got), raw
	}
	got, kept := read("3", ` {"id":3, "jsonrpc":"2.0","result":`+result+"}\n")
	if got != `{"jsonrpc":"2.0","id":3,"result":{"content":[],"resultType":"complete"}}` || string(kept.bytes()) != result || !kept.lightened() {
		t.Errorf("the SDK reads %.200q; the result kept is %.100q (a stand-in handed on: %v)", got, kept.bytes(), kept.lightened())
	}
	if _, err := jsonrpc.DecodeMessage([]byte(got)); err != nil {
		t.Errorf("the SDK cannot read the stand-in: %v", err)
	}
	for _, c := range []struct{ id, body string }{
		{"3", `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"small"}]}}`},
		{"3", `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + big + `"}],"isError":true}}`},
		{"4", `{"jsonrpc":"2.0","id":3,"result":` + result + `}`},
		{"3", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"` + big + `"}}`},
		{"3", `{"jsonrpc":"2.0","id":3,"result":` + result},
	} {
		got, raw := read(c.id, c.body)
		if got != c.body || raw.lightened() {
			t.Errorf("%.80q... reached the SDK as %.80q... (a stand-in: %v)", c.body, got, raw.lightened())
		}
	}
}

// The same over an event stream: the event that answers the call with a
// big result reaches the SDK with a stand-in (its other fields kept);
// every other event, and one cut short, as it came.
func TestAnHTTPServersBigStreamedAnswerIsKeptAndTheSDKGetsAStandIn(t *testing.T) {
	big := strings.Repeat(`\u00e9<&>`, lightFrom/8)
	result := `{"content":[{"type":"text","text":"` + big + `"}],"x":1}`
	progress := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"
	other := "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":" + result + "}\r\n\r\n"
	answer := "event: message\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\n" + "data: \"id\":3,\"result\":" + result + "}\r\n\r\n"
	cut := "data: {\"jsonrpc\":\"2.0\",\"id\":3"
	raw := &rawResult{id: []byte("3")}
	body := &watchedBody{ReadCloser: io.NopCloser(strings.NewReader(progress + other + answer + cut)), u: &Server{}, raw: raw}
	got, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	want := progress + other + "event: message\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n" + cut
	if string(got) != want {
		at := 0
		for at < len(got) && at < len(want) && got[at] == want[at] {
			at++
		}
		t.Fatalf("from byte %d the SDK reads %.200q, not %.200q", at, got[at:], want[at:])
	}
	if string(raw.bytes()) != result || !raw.lightened() {
		t.Errorf("the result kept is %.100q (a stand-in handed on: %v)", raw.bytes(), raw.lightened())
	}
}

// A server that never ends an event is not held in memory past what the
// SDK would read of it: the stream reaches the SDK as it came.
func TestAnEndlessEventIsNotHeld(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		_, _ = w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 20 {
			_, _ = w.Write(chunk)
		}
		_ = w.Close()
	}()
	body := &watchedBody{ReadCloser: r, u: &Server{}, raw: &rawResult{id: []byte("3")}}
	n, err := io.Copy(io.Discard, body)
	if err != nil || n < 20<<20 {
		t.Fatalf("the SDK read %d bytes (%v)", n, err)
	}
	if body.raw != nil || len(body.whole) > 0 || len(body.line) > maxWatchedLine {
		t.Errorf("still holding %d bytes of the event", len(body.whole)+len(body.line))
	}
}
