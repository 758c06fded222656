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
	"time"

	"github.com/countersign/countersign/tools/rawjson"
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
	// cancelled are the requests the client cancelled, by id as the SDK
	// answers them, and when: their answers are not written (MCP: a
	// request cancelled is not answered).
	cancelMu  sync.Mutex
	cancelled map[string]time.Time
}

// cancelKept is how long a cancelled request's answer is waited for to be
// dropped.
const cancelKept = 5 * time.Minute

// noteCancel notes the request a cancellation from the client names.
func (l *Writer) noteCancel(line []byte) {
	if !bytes.Contains(line, []byte("notifications/cancelled")) {
		return
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "notifications/cancelled" || len(m.Params.RequestID) == 0 {
		return
	}
	keys := []string{string(compact(m.Params.RequestID))}
	if name, ok := l.ids.cancelled(compact(m.Params.RequestID)); ok {
		b, _ := json.Marshal(name)
		keys = append(keys, string(b))
	}
	now := time.Now()
	l.cancelMu.Lock()
	defer l.cancelMu.Unlock()
	if l.cancelled == nil {
		l.cancelled = map[string]time.Time{}
	}
	for k, at := range l.cancelled {
		if now.Sub(at) > cancelKept {
			delete(l.cancelled, k)
		}
	}
	for _, k := range keys {
		l.cancelled[k] = now
	}
}

// dropped says whether p answers a request the client cancelled (and
// forgets it).
func (l *Writer) dropped(p []byte) bool {
	l.cancelMu.Lock()
	defer l.cancelMu.Unlock()
	if len(l.cancelled) == 0 {
		return false
	}
	env := rawjson.Envelope(bytes.NewReader(p), "id", "method")
	if env["method"] != nil || env["id"] == nil {
		return false // a request or a notification of the server's
	}
	key := string(compact(env["id"]))
	if _, ok := l.cancelled[key]; !ok {
		return false
	}
	delete(l.cancelled, key)
	return true
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p whole, with a stand-in id put back.
func (l *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if l.dropped(p) {
		return n, nil
	}
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
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, over, err := readLine(br)
			if over != nil {
				// A line past the bound is read through (kept no longer
				// than its id) and answered; the next line is read.
				_, _ = out.Write(rpcError(overID(over), -32600, "Invalid Request: a line over 8 MiB (a call's arguments are at most 1 MiB, escaped): nothing was done"))
			}
			if line = bytes.TrimSpace(line); len(line) > 0 {
				if reply := notAMessage(line); reply != nil {
					_, _ = out.Write(reply)
				} else {
					out.noteCancel(line)
					line = out.ids.rewrite(line)
					if _, werr := pw.Write(append(append([]byte(nil), line...), '\n')); werr != nil {
						return
					}
				}
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// readLine reads the next line, without its newline. One over MaxLine is
// not returned: over is then a reader of it (its start as read, then the
// rest as it streams, to the newline), read through before the next call.
func readLine(br *bufio.Reader) (line []byte, over io.Reader, err error) {
	for {
		chunk, e := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+1 {
			return nil, io.MultiReader(bytes.NewReader(append(line, chunk...)), &restOfLine{br: br}), nil
		}
		line = append(line, chunk...)
		switch e {
		case nil:
			return line[:len(line)-1], nil, nil
		case bufio.ErrBufferFull:
			continue
		default:
			return line, nil, e
		}
	}
}

// restOfLine reads br to the end of the line (its newline consumed, not
// given).
type restOfLine struct {
	br      *bufio.Reader
	pending []byte // read from br's buffer, not given yet
	done    bool
}

func (r *restOfLine) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.done {
			return 0, io.EOF
		}
		chunk, err := r.br.ReadSlice('\n')
		switch err {
		case nil:
			chunk, r.done = chunk[:len(chunk)-1], true
		case bufio.ErrBufferFull:
		default:
			r.done = true // the input ended within the line
		}
		r.pending = chunk // br is not read again until it is given
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// overID is the id of a line too long to take, read through: as the
// client wrote it when it is one an answer may carry, else null.
func overID(over io.Reader) any {
	id := rawjson.Envelope(over, "id")["id"]
	_, _ = io.Copy(io.Discard, over)
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) {
		return []byte(id)
	}
	return nil
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

// SDKID says whether the SDK takes an id as it is and gives it back the
// same: a string, or an integer it holds exactly (within ±2^53: it keeps
// numbers as float64, so 9007199254740993 would come back as …992).
func SDKID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' {
		return true
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil && n <= 1<<53 && n >= -(1<<53)
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
	if r, ok := raw["id"]; ok && method {
		// JSON-RPC: an id is a string, a number or null; MCP: never null.
		switch v := compact(r); {
		case string(v) == "null":
			return rpcError(nil, -32600, "Invalid Request: a request's id is a string or an integer, not null (a notification has no id)")
		case len(v) > 0 && (v[0] == '{' || v[0] == '[' || v[0] == 't' || v[0] == 'f'):
			return rpcError(nil, -32600, "Invalid Request: an id is a string or a number, not "+map[byte]string{'{': "an object", '[': "an array", 't': "true", 'f': "false"}[v[0]])
		}
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
