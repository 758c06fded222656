package mcpgate

import (
	"bytes"
	"net/http"
)

// answering is where the SDK writes its answer to a tools/call: the
// stand-in result the gateway gave it (MetaAnswer) is written as
// the upstream's result in its own bytes, Countersign's words spliced in
// (mcpgate's answer.go). Everything else on the stream (progress, log
// messages, an upstream's requests) passes as the SDK wrote it.
type answering struct {
	http.ResponseWriter
	a      *Answer
	modern string // the request's method, for a client of a revision without sessions
}

// answerToolCalls names a place for the answer to a tools/call (or a
// prompts/get, a resources/read: an upstream's answer in its bytes) among
// the request's headers (over any a client sent) and returns the writer that
// fills it in; done forgets the place. Other requests: w, as it is.
func (ep *Door) answerToolCalls(w http.ResponseWriter, r *http.Request, m *rpcMessage) (http.ResponseWriter, func()) {
	r.Header.Del(HeaderAnswer)
	if m == nil || (m.Method != "tools/call" && m.Method != "prompts/get" && m.Method != "resources/read" && m.Method != "completion/complete") || len(m.ID) == 0 {
		return w, func() {}
	}
	name, a, done := ep.answers.Expect()
	r.Header.Set(HeaderAnswer, name)
	modern := ""
	if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= ModernMCP {
		modern = m.Method
	}
	return &answering{ResponseWriter: w, a: a, modern: modern}, done
}

func (w *answering) Write(b []byte) (int, error) {
	if raw := w.a.Bytes(); raw != nil && bytes.Contains(b, []byte(MetaAnswer)) {
		if out, ok := withAnswer(b, raw, w.modern); ok {
			if _, err := w.ResponseWriter.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *answering) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *answering) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// withAnswer is what the SDK wrote (one JSON message, or one event of a
// stream) with its response's result replaced by raw (false: it holds no
// response with the stand-in).
func withAnswer(written, raw []byte, modern string) ([]byte, bool) {
	if t := bytes.TrimSpace(written); len(t) > 0 && t[0] == '{' {
		return AnswerIn(t, raw, modern)
	}
	// An event: its data line is the message. The result's line breaks
	// (JSON's white space) would end the line: each goes on a data line
	// of its own, which the client joins again.
	before, rest, ok := bytes.Cut(written, []byte("data: "))
	if !ok || (len(before) > 0 && before[len(before)-1] != '\n') {
		return nil, false
	}
	data, after, _ := bytes.Cut(rest, []byte("\n"))
	msg, ok := AnswerIn(data, raw, modern)
	if !ok {
		return nil, false
	}
	if bytes.ContainsAny(msg, "\r\n") {
		msg = bytes.ReplaceAll(msg, []byte("\r\n"), []byte("\n"))
		msg = bytes.ReplaceAll(msg, []byte("\r"), []byte("\n"))
		msg = bytes.ReplaceAll(msg, []byte("\n"), []byte("\ndata: "))
	}
	out := make([]byte, 0, len(before)+len(msg)+len(after)+8)
	out = append(append(out, before...), "data: "...)
	out = append(append(out, msg...), '\n')
	return append(out, after...), true
}
