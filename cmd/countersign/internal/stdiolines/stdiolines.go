// Package stdiolines stands between an MCP client's stdio and the SDK's
// transport in `countersign mcp`: it answers, itself, the lines that are
// not one JSON-RPC message, and stands in for the ids the SDK does not
// take, so that a client's mistake gets an error reply, not the bridge gone,
// and an id comes back as the client wrote it.
package stdiolines

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"
)

// The stdio bridge answers, itself, the lines a client sends that are not
// one JSON-RPC message (a line that is not JSON, `{}`, a batch), with the
// JSON-RPC error a server owes, and passes every other line on: a client's
// mistake gets an error reply, not the bridge gone. An id of any JSON type
// comes back as the client sent it.

// MaxLine bounds one line from the client: a call's arguments may be
// 1 MiB, escaped.
const MaxLine = 8 << 20

// Writer lets the bridge's own replies and the SDK's messages share
// stdout a whole line at a time (the SDK writes a message in one Write),
// and puts back, in an answer, the id the client sent when the bridge
// stood in for it (ids).
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	ids *ids
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p whole, with a stand-in id put back.
func (l *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if l.ids != nil {
		p = l.ids.restore(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// ids stands in for the ids the SDK does not take (1.5, true, an object, a
// number past 64 bits: JSON-RPC allows any, MCP only strings and
// integers): such a request goes on with a string of the bridge's, and its
// answer goes back with the id as the client wrote it, byte for byte.
type ids struct {
	mu     sync.Mutex
	next   int
	byName map[string][]byte // stand-in -> the client's id
	byRaw  map[string]string // the client's id -> stand-in (to cancel it)
}

// standInPrefix starts every stand-in id; an answer without it is passed
// on untouched.
const standInPrefix = "countersign-bridge-id-"

func (d *ids) standIn(raw []byte) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if name, ok := d.byRaw[string(raw)]; ok {
		return name
	}
	d.next++
	name := standInPrefix + strconv.Itoa(d.next)
	if d.byName == nil {
		d.byName, d.byRaw = map[string][]byte{}, map[string]string{}
	}
	d.byName[name] = append([]byte(nil), raw...)
	d.byRaw[string(raw)] = name
	return name
}

// cancelled is the stand-in of the id a cancellation names, if any.
func (d *ids) cancelled(raw []byte) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	name, ok := d.byRaw[string(raw)]
	return name, ok
}

// restore puts the client's id back in an answer to a request the bridge
// stood in for, and forgets the stand-in.
func (d *ids) restore(p []byte) []byte {
	if !bytes.Contains(p, []byte(standInPrefix)) {
		return p
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, raw := range d.byName {
		key := []byte(`"id":"` + name + `"`)
		if bytes.Contains(p, key) {
			delete(d.byName, name)
			delete(d.byRaw, string(raw))
			return bytes.Replace(p, key, append([]byte(`"id":`), raw...), 1)
		}
	}
	return p
}

// Guard is in with the lines that are not a JSON-RPC message taken
// out and answered on out, and the ids the SDK does not take stood in for
// (out.ids).
func Guard(in io.Reader, out *Writer) io.Reader {
	if out.ids == nil {
		out.ids = &ids{}
	}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), MaxLine)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			if reply := notAMessage(line); reply != nil {
				_, _ = out.Write(reply)
				continue
			}
			line = out.ids.rewrite(line)
			if _, err := pw.Write(append(append([]byte(nil), line...), '\n')); err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			// A line past the bound: said, and the bridge ends (it cannot
			// find the next line's start).
			_, _ = out.Write(rpcError(nil, -32600, "a line over 8 MiB: the bridge cannot read past it"))
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

// rewrite gives a request whose id the SDK does not take a stand-in id,
// and a cancellation of such a request the stand-in's; any other line is
// returned as it is.
func (d *ids) rewrite(line []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	if raw, ok := m["id"]; ok && !SDKID(raw) && m["method"] != nil {
		name, _ := json.Marshal(d.standIn(compact(raw)))
		m["id"] = name
		b, err := json.Marshal(m)
		if err != nil {
			return line
		}
		return b
	}
	var method string
	if json.Unmarshal(m["method"], &method) == nil && method == "notifications/cancelled" {
		var params map[string]json.RawMessage
		if json.Unmarshal(m["params"], &params) == nil {
			if raw, ok := params["requestId"]; ok && !SDKID(raw) {
				if name, ok := d.cancelled(compact(raw)); ok {
					params["requestId"], _ = json.Marshal(name)
					m["params"], _ = json.Marshal(params)
					if b, err := json.Marshal(m); err == nil {
						return b
					}
				}
			}
		}
	}
	return line
}

// SDKID says whether the SDK takes an id as it is: null, a string, or an
// integer that fits in 64 bits.
func SDKID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || raw[0] == '"' {
		return true
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		_, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil
	}
	return false
}

// compact is raw without insignificant space, so one id written two ways
// ({"a": 1} and {"a":1}) is one id.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// notAMessage is the error reply to a line that is not one JSON-RPC 2.0
// message this bridge can pass on; nil when it is one.
func notAMessage(line []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if !json.Valid(line) || dec.Decode(&v) != nil {
		return rpcError(nil, -32700, "Parse error: the line is not one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		if _, batch := v.([]any); batch {
			return rpcError(nil, -32600, "Invalid Request: batches are not supported (MCP 2025-06-18 and later); send one message a line")
		}
		return rpcError(nil, -32600, "Invalid Request: a message is a JSON object")
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(line, &raw)
	var id any // the id as the client wrote it
	if r, ok := raw["id"]; ok {
		id = compact(r)
	}
	_, method := m["method"].(string)
	_, result := m["result"]
	_, fault := m["error"]
	if m["jsonrpc"] != "2.0" || (!method && !result && !fault) {
		return rpcError(id, -32600, `Invalid Request: a message has "jsonrpc": "2.0" and a method (or a result or an error)`)
	}
	return nil
}

func rpcError(id any, code int, message string) []byte {
	if raw, ok := id.([]byte); ok {
		id = json.RawMessage(raw)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	return append(b, '\n')
}
