package rawjson

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The id and method of a message are found wherever the client wrote them,
// after a huge params too, with strings that hold braces, quotes and
// escapes, and what is not one object gives nothing.
func TestEnvelopeFindsTheIDWhereverItIs(t *testing.T) {
	big := strings.Repeat(`x\"}{,:`, 1<<20) // 7 MiB of what looks like structure
	for name, c := range map[string]struct {
		msg, id, method string
	}{
		"id first":               {`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"` + big + `"}}`, `7`, "tools/call"},
		"id after params":        {`{"jsonrpc":"2.0","method":"tools/call","params":{"a":["` + big + `",{"id":1}]},"id":"req-9"}`, `"req-9"`, "tools/call"},
		"spaces and a big id":    {"{ \"params\" : {\"id\":3} ,\n \"id\" : 9007199254740993 , \"method\":\"ping\" }", `9007199254740993`, "ping"},
		"a key with an escape":   {`{"i\"d":1,"id":null,"method":"x"}`, `null`, "x"},
		"an id too long to keep": {`{"id":"` + strings.Repeat("a", 2000) + `","method":"m"}`, ``, "m"},
		"a batch":                {`[{"id":1,"method":"m"}]`, ``, ``},
		"not JSON":               {`hello`, ``, ``},
		"cut short":              {`{"method":"m","params":{"a":"` + big, ``, "m"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Envelope(strings.NewReader(c.msg), "id", "method")
			var method string
			_ = json.Unmarshal(got["method"], &method)
			if string(got["id"]) != c.id || method != c.method {
				t.Fatalf("id %q method %q, want %q %q", got["id"], method, c.id, c.method)
			}
		})
	}
}

// It reads a message of any size holding only a few bytes: 64 MiB streamed
// through it take no more memory than its buffer.
func TestEnvelopeStreams(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`{"method":"tools/call","params":{"a":"`), io.LimitReader(repeat('x'), 64<<20), strings.NewReader(`"},"id":42}`))
	if got := Envelope(r, "id"); string(got["id"]) != "42" {
		t.Fatalf("id %q", got["id"])
	}
}

type repeat byte

func (b repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
