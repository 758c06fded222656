package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/countersign/countersign/tools/rawjson"
)

// An HTTP upstream's answer to a call, as the bytes it sent: what is
// recorded, and what the gateway hands on (web/mcpgate), instead of the
// SDK's encoding of what it decoded, which escapes <, > and & again,
// orders keys its own way and drops the keys it does not know. Over stdio
// the lines are read by the SDK; its connection hands over each response
// with its result still in the bytes that came (rawCalls).

// rawResult is where the result of one call is kept as it is read.
type rawResult struct {
	mu    sync.Mutex
	b     []byte
	id    []byte // the call's JSON-RPC id as sent (nil: not known)
	light bool   // the SDK was handed a stand-in for b (lighten)
}

type rawKey struct{}

// withRawResult asks for the bytes of the answer to the call made with
// the context it returns.
func withRawResult(ctx context.Context) (context.Context, *rawResult) {
	r := &rawResult{}
	return context.WithValue(ctx, rawKey{}, r), r
}

func rawResultOf(ctx context.Context) *rawResult {
	r, _ := ctx.Value(rawKey{}).(*rawResult)
	return r
}

// heard takes a JSON-RPC response read on the call's own answer: its
// result, a JSON object, as it came, when its id is the call's (a peer
// may put anything on the stream; what the SDK took is the response with
// that id). The first one counts.
func (r *rawResult) heard(id, result json.RawMessage) {
	r.mu.Lock()
	ours := r.id != nil && bytes.Equal(bytes.TrimSpace(id), r.id)
	r.mu.Unlock()
	if ours {
		r.take(result)
	}
}

// sent notes the id of the call, from the request's body as sent.
func (r *rawResult) sent(req *http.Request) {
	if req.GetBody == nil {
		return
	}
	body, err := req.GetBody()
	if err != nil {
		return
	}
	defer body.Close()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(body).Decode(&m) == nil && len(m.ID) > 0 {
		r.mu.Lock()
		r.id = bytes.TrimSpace(m.ID)
		r.mu.Unlock()
	}
}

// take keeps the result of the response a connection matched to the call.
func (r *rawResult) take(result json.RawMessage) {
	if t := bytes.TrimSpace(result); len(t) == 0 || t[0] != '{' {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil {
		r.b = result
	}
}

// bytes is the result as it came (nil: not heard).
func (r *rawResult) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

// response is a message on an answer, read for what Countersign needs of
// it: a request or notification (method) to relay, or the response.
type response struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// jsonBody is an answer sent as one JSON message, read whole before the
// SDK reads it (as the SDK reads one anyway): its result is taken as it
// came and, when it is big, the SDK is handed the same response with a
// stand-in for its result (lighten), as over stdio; otherwise it reads the
// answer as it came.
type jsonBody struct {
	io.ReadCloser
	raw  *rawResult
	body []byte // the answer, when it was read before (nil: read it)
	// read is body's object, when it was read as one (jsonAnswer).
	obj  *rawjson.Object
	read *bytes.Reader // what the SDK reads, once the answer is in
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.read == nil {
		body := b.body
		if body == nil {
			var err error
			if body, err = io.ReadAll(b.ReadCloser); err != nil {
				return 0, err
			}
		}
		var light []byte
		if b.obj != nil {
			light, _ = b.raw.lightAnswerOf(body, b.obj, nil)
		} else {
			light, _ = b.raw.lightAnswer(body)
		}
		b.read = bytes.NewReader(light)
	}
	return b.read.Read(p)
}

// lightAnswer takes the result of msg, one JSON-RPC message, when it
// answers the call (heard), and is msg with a stand-in for that result
// when the result is big enough not to be decoded; else msg. answer says
// whether msg is a response with a result (then nothing else is to be
// done with it).
func (r *rawResult) lightAnswer(msg []byte) (out []byte, answer bool) {
	o, err := rawjson.ReadObject(msg)
	return r.lightAnswerOf(msg, o, err)
}

// lightAnswerOf is lightAnswer of msg read already (rawjson.ReadObject).
func (r *rawResult) lightAnswerOf(msg []byte, o *rawjson.Object, err error) (out []byte, answer bool) {
	if err != nil || o.Value(msg, "method") != nil || o.Value(msg, "error") != nil {
		return msg, false
	}
	id, result := o.Value(msg, "id"), o.Value(msg, "result")
	if result == nil {
		return msg, false
	}
	r.heard(id, result)
	if len(result) < lightFrom || !bytes.Equal(r.bytes(), result) {
		return msg, true
	}
	standIn := r.lighten()
	if standIn == nil {
		return msg, true
	}
	out = append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	return append(append(append(out, `,"result":`...), standIn...), '}'), true
}

// KeepingResults is next, with the result of each call made under a
// context from WithResultBytes kept as it came (the stdio bridge's hop to
// /mcp, countersign mcp); a big tool result is decoded by the SDK as a
// stand-in, as for an upstream.
func KeepingResults(next http.RoundTripper) http.RoundTripper { return watching{next: next} }

// WithResultBytes asks for the bytes of the result of the request made
// with the context it returns (through KeepingResults); got is them (nil:
// not heard), and lightened says whether the SDK decoded a stand-in for
// them, not them.
func WithResultBytes(ctx context.Context) (_ context.Context, got func() []byte, lightened func() bool) {
	ctx, r := withRawResult(ctx)
	return ctx, r.bytes, r.lightened
}

// ListedTools is each tool of a tools/list result in the bytes it came in
// (nil each when they are not known, or not n of them).
func ListedTools(result []byte, n int) []json.RawMessage { return listed(result, n) }

// jsonAnswer reads an answer sent as application/json. One JSON message
// is read by the SDK through jsonBody (its result kept as it came). Some
// servers send a call's notifications and then its response as JSON texts
// one after another in that body (NDJSON; the MCP project's reference
// everything-server does for test_streaming_elicitation), which the SDK
// cannot read: the SDK is handed them as the events of a stream instead,
// each read as any stream's (watchedBody). The answer is read whole first,
// as the SDK reads application/json anyway.
func (w watching) jsonAnswer(resp *http.Response, r *Relay, raw *rawResult) (*http.Response, error) {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	texts := [][]byte{body}
	obj, err := rawjson.ReadObject(body) // read once: jsonBody takes it
	if err != nil {
		if t, err := rawjson.Texts(body); err == nil {
			texts = t
		}
	}
	if len(texts) == 1 {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if raw != nil {
			resp.Body = &jsonBody{ReadCloser: resp.Body, raw: raw, body: body, obj: obj}
		}
		return resp, nil
	}
	var events bytes.Buffer
	for _, t := range texts {
		// A text's own line breaks (JSON's white space) each start a
		// data line of the event, which the reader joins again.
		t = bytes.ReplaceAll(bytes.ReplaceAll(t, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		events.WriteString("event: message\ndata: ")
		events.Write(bytes.ReplaceAll(t, []byte("\n"), []byte("\ndata: ")))
		events.WriteString("\n\n")
	}
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Body = &watchedBody{ReadCloser: io.NopCloser(&events), u: w.u, relay: r, raw: raw}
	return resp, nil
}
