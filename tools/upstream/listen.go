package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// A 2026-07-28 server's subscriptions/listen answer is a stream that stays
// open: the server tells of changed lists on it for as long as Countersign
// listens. Some servers send it as application/json with one JSON text
// after another (NDJSON; the MCP project's reference everything-server
// does), which the Go SDK's client reads whole, so it never read one
// notification. Such an answer is handed to the SDK as the events of a
// stream, each text as it arrives.

// isListen says whether req asks to listen (the method in its standard
// header, which the SDK sets at 2026-07-28).
func isListen(req *http.Request) bool {
	return req.Header.Get("Mcp-Method") == "subscriptions/listen"
}

// listenAnswer is a listen stream sent as application/json, as events.
func listenAnswer(resp *http.Response) *http.Response {
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Body = &textEvents{body: resp.Body, in: bufio.NewReader(resp.Body)}
	return resp
}

// textEvents reads JSON texts one after another, each as it is complete
// (at the end of a line), and gives them as the events of a stream.
type textEvents struct {
	body io.Closer
	in   *bufio.Reader
	text []byte // the text so far, over lines
	out  bytes.Buffer
}

// maxText bounds one text of a listen stream (a server that never ends
// one).
const maxText = 4 << 20

func (e *textEvents) Read(p []byte) (int, error) {
	for e.out.Len() == 0 {
		line, err := e.in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			err = nil
		}
		e.text = append(e.text, line...)
		if t := bytes.TrimSpace(e.text); len(t) > 0 && json.Valid(t) {
			// A text's own line breaks each start a data line of the
			// event, which the reader joins again.
			t = bytes.ReplaceAll(bytes.ReplaceAll(t, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
			e.out.WriteString("event: message\ndata: ")
			e.out.Write(bytes.ReplaceAll(t, []byte("\n"), []byte("\ndata: ")))
			e.out.WriteString("\n\n")
			e.text = e.text[:0]
		} else if len(t) == 0 {
			e.text = e.text[:0]
		} else if len(e.text) > maxText {
			return 0, io.ErrUnexpectedEOF
		}
		if err != nil {
			if e.out.Len() > 0 {
				break
			}
			if err == io.EOF && len(strings.TrimSpace(string(e.text))) > 0 {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return e.out.Read(p)
}

func (e *textEvents) Close() error { return e.body.Close() }
