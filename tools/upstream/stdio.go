package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools/rawjson"
)

// A stdio server's lines are read before the SDK reads them: the line of
// a big answer to a call made with withRawResult is kept as it came, and
// the SDK is handed the same response with a small stand-in for its
// result, which it decodes instead. The SDK reads each line three times
// over (the standard library's decoder to find where it ends, then twice
// more, with its depth check, to decode it), and a 2 MB image's answer
// costs more to read so than to send. Every other line reaches the SDK as
// it came.

// stdioTransport starts a stdio MCP server as the SDK's CommandTransport
// does, and stops it the same way (stdin closed, then SIGTERM, then
// SIGKILL), its output read through lines.
type stdioTransport struct{ cmd *exec.Cmd }

func (t stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	c := &rawConn{waiting: map[jsonrpc.ID]*rawResult{}}
	in := &lines{r: bufio.NewReaderSize(stdout, 64<<10), conn: c}
	sdk, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: &process{cmd: t.cmd, stdin: stdin}}).Connect(ctx)
	if err != nil {
		_ = stdin.Close()
		_ = t.cmd.Process.Kill()
		_ = t.cmd.Wait()
		return nil, err
	}
	c.Connection = sdk
	return c, nil
}

// process is a server's stdin; closing it stops the server, as the MCP
// specification asks of a client: stdin closed, then, if it has not ended
// within stopWait, SIGTERM, then SIGKILL.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// stopWait is how long a server is given to end at each step.
const stopWait = 5 * time.Second

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	err := p.stdin.Close()
	ended := make(chan error, 1)
	go func() { ended <- p.cmd.Wait() }()
	for _, next := range []func() error{
		func() error { return p.cmd.Process.Signal(syscall.SIGTERM) },
		p.cmd.Process.Kill,
		func() error { return nil },
	} {
		select {
		case werr := <-ended:
			var exit *exec.ExitError
			if errors.As(werr, &exit) {
				werr = nil // it was asked to stop
			}
			return errors.Join(err, werr)
		case <-time.After(stopWait):
		}
		_ = next()
	}
	return errors.New("the MCP server did not stop")
}

// lines is a server's output, line by line, as the SDK is to read it.
type lines struct {
	r       *bufio.Reader
	conn    *rawConn
	pending []byte // of the line being read
	passing bool   // the rest of a line too long to hold: as it comes
	err     error
}

// maxHeld is the longest line held to be looked at: the SDK's own limit,
// at which it stops reading the server. A longer line passes on as it is,
// for the SDK to refuse.
const maxHeld = mcp.DefaultMaxLineLength

func (l *lines) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		l.pending, l.err = l.next()
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// next is the next line (or part of a line too long to hold), to hand on.
func (l *lines) next() ([]byte, error) {
	var line []byte
	for {
		part, err := l.r.ReadSlice('\n')
		if l.passing {
			l.passing = err == bufio.ErrBufferFull
			return bytes.Clone(part), ignoreFull(err)
		}
		line = append(line, part...)
		if err != bufio.ErrBufferFull {
			if err == nil && len(line) >= lightFrom {
				line = l.conn.lightLine(line)
			}
			return line, err
		}
		if len(line) >= maxHeld {
			l.passing = true
			return line, nil
		}
	}
}

func ignoreFull(err error) error {
	if err == bufio.ErrBufferFull {
		return nil
	}
	return err
}

// rawConn is the SDK's connection to a stdio server: the result of a call
// made with withRawResult is kept as its line held it, from the line
// itself when it is big (lightLine), else from the response the SDK read
// (it decodes a response's result later, from those bytes).
type rawConn struct {
	mcp.Connection
	mu      sync.Mutex
	waiting map[jsonrpc.ID]*rawResult // by the id of the call sent
}

// lightLine is line, one JSON-RPC message, with a stand-in for its result
// when it answers a call whose result is kept (lighten); otherwise line.
func (c *rawConn) lightLine(line []byte) []byte {
	o, err := rawjson.ReadObject(line)
	if err != nil || o.Value(line, "method") != nil || o.Value(line, "error") != nil {
		return line
	}
	id, result := o.Value(line, "id"), o.Value(line, "result")
	var v any
	if result == nil || json.Unmarshal(id, &v) != nil {
		return line
	}
	key, err := jsonrpc.MakeID(v)
	if err != nil || !key.IsValid() {
		return line
	}
	c.mu.Lock()
	raw := c.waiting[key]
	c.mu.Unlock()
	if raw == nil {
		return line
	}
	raw.take(result)
	standIn := raw.lighten()
	if standIn == nil {
		return line
	}
	out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	out = append(append(append(out, `,"result":`...), standIn...), "}\n"...)
	return out
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
			if len(r.Result) >= lightFrom {
				if standIn := raw.lighten(); standIn != nil {
					r.Result = standIn
				}
			}
		}
	}
	return m, err
}

// lightFrom is the size from which a result the SDK would decode only for
// Countersign to hand on its bytes is not decoded at all: decoding (with
// its depth check, and the base64 of an image) costs more than the hop.
const lightFrom = 64 << 10

// lighten is a stand-in for the result kept, for the SDK to decode in its
// place (nil: it is to decode the result itself): the result is a success
// in valid UTF-8 (recorded and answered as its bytes), so the stand-in
// keeps only what the SDK acts on, its resultType. An error's words are
// read from its content, so an error is decoded.
func (r *rawResult) lighten() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b == nil || !utf8.Valid(r.b) {
		return nil
	}
	o, err := rawjson.ReadObject(r.b)
	if err != nil {
		return nil
	}
	if isErr := o.Value(r.b, "isError"); isErr != nil && string(isErr) != "false" {
		return nil
	}
	if content := o.Value(r.b, "content"); len(content) == 0 || content[0] != '[' {
		return nil // not a result: the SDK says so
	}
	standIn := []byte(`{"content":[]`)
	if t := o.Value(r.b, "resultType"); t != nil {
		standIn = append(append(standIn, `,"resultType":`...), t...)
	}
	r.light = true
	return append(standIn, '}')
}

// lightened says whether the SDK decoded a stand-in, not the result.
func (r *rawResult) lightened() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.light
}

func (c *rawConn) forget(id jsonrpc.ID) *rawResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw := c.waiting[id]
	delete(c.waiting, id)
	return raw
}
