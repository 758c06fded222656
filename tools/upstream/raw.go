package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An HTTP upstream's answer to a call, as the bytes it sent: what is
// recorded, and what the gateway hands on (web/mcpgate), instead of the
// SDK's encoding of what it decoded, which escapes <, > and & again,
// orders keys its own way and drops the keys it does not know. Over stdio
// the lines are read by the SDK; its connection hands over each response
// with its result still in the bytes that came (rawCalls).

// rawResult is where the result of one call is kept as it is read.
type rawResult struct {
	mu sync.Mutex
	b  []byte
	id []byte // the call's JSON-RPC id as sent (nil: not known)
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

// jsonBody is an answer sent as one JSON message: kept as it is read,
// and its result taken at the end.
type jsonBody struct {
	io.ReadCloser
	raw *rawResult
	buf bytes.Buffer
}

func (b *jsonBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		var m response
		if json.Unmarshal(b.buf.Bytes(), &m) == nil && m.Method == "" {
			b.raw.heard(m.ID, m.Result)
		}
		b.buf = bytes.Buffer{}
	}
	return n, err
}

// rawCalls is a stdio server's transport: the result of a call made with
// withRawResult is kept as its line held it (the SDK decodes a response's
// result later, from those bytes).
type rawCalls struct{ mcp.Transport }

func (t rawCalls) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: c, waiting: map[jsonrpc.ID]*rawResult{}}, nil
}

type rawConn struct {
	mcp.Connection
	mu      sync.Mutex
	waiting map[jsonrpc.ID]*rawResult // by the id of the call sent
}

func (c *rawConn) Write(ctx context.Context, m jsonrpc.Message) error {
	r, ok := m.(*jsonrpc.Request)
	raw := rawResultOf(ctx)
	if !ok || raw == nil || !r.ID.IsValid() {
		return c.Connection.Write(ctx, m)
	}
	c.mu.Lock()
	if len(c.waiting) >= maxWaiting {
		// Calls given up on whose answers never came: their results are
		// no longer asked for (a call still waiting falls back to the
		// SDK's encoding of its result).
		clear(c.waiting)
	}
	c.waiting[r.ID] = raw
	c.mu.Unlock()
	err := c.Connection.Write(ctx, m)
	if err != nil {
		c.forget(r.ID)
	}
	return err
}

// maxWaiting bounds the calls whose results a connection keeps a place for.
const maxWaiting = 1024

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Response); ok && err == nil {
		if raw := c.forget(r.ID); raw != nil && r.Error == nil {
			raw.take(r.Result)
		}
	}
	return m, err
}

func (c *rawConn) forget(id jsonrpc.ID) *rawResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw := c.waiting[id]
	delete(c.waiting, id)
	return raw
}
