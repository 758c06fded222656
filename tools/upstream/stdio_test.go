package upstream

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A stdio server's big answer to a call whose result is kept reaches the
// SDK with a stand-in for its result, and the result is kept as it came;
// every other line (small, not asked for, a request, an error, an error
// result, more than one line, too long to hold) reaches the SDK as it
// came.
func TestAStdioServersBigAnswerIsKeptAndTheSDKGetsAStandIn(t *testing.T) {
	big := strings.Repeat(`\u00e9<&>`, lightFrom/8)
	result := `{"content":[{"type":"text","text":"` + big + `"}] ,"resultType":"complete","x":{"k":[1]}}`
	c := &rawConn{waiting: map[jsonrpc.ID]*rawResult{}}
	kept, other, failed, small := &rawResult{}, &rawResult{}, &rawResult{}, &rawResult{}
	for v, r := range map[any]*rawResult{float64(3): kept, "s": other, float64(5): failed, float64(6): small} {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		c.waiting[id] = r
	}
	same := []string{
		`{"jsonrpc":"2.0","id":4,"result":` + result + `}` + "\n", // not asked for
		`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{"t":"` + big + `"}}` + "\n",
		`{"jsonrpc":"2.0","id":"s","error":{"code":1,"message":"` + big + `"}}` + "\n",
		`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"` + big + `"}],"isError":true}}` + "\n",
		`{"jsonrpc":"2.0","id":6,"result":{"content":[]}}` + "\n",
		`{"jsonrpc":"2.0","id":7,` + "\n" + `"result":` + result + `}` + "\n",
	}
	answer := ` {"id":3, "jsonrpc":"2.0","result":` + result + "}\r\n"
	tooLong := `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", maxHeld) + `"}]}}` + "\n"
	out := strings.Join(same[:3], "") + answer + strings.Join(same[3:], "") + tooLong
	in := &lines{r: bufio.NewReaderSize(strings.NewReader(out), 64<<10), conn: c}
	got, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(same[:3], "") + `{"jsonrpc":"2.0","id":3,"result":{"content":[],"resultType":"complete"}}` + "\n" +
		strings.Join(same[3:], "") + tooLong
	if string(got) != want {
		at := 0
		for at < len(got) && at < len(want) && got[at] == want[at] {
			at++
		}
		t.Fatalf("from byte %d the SDK reads %.200q, not %.200q", at, got[at:], want[at:])
	}
	if string(kept.bytes()) != result || !kept.lightened() {
		t.Errorf("the result kept is %.100q (a stand-in handed on: %v)", kept.bytes(), kept.lightened())
	}
	if other.lightened() || small.lightened() || failed.lightened() {
		t.Error("a stand-in was handed on for an error, a request or a small result")
	}
	// The SDK reads what it is handed as it would have read the server.
	for _, line := range bytes.SplitAfter(got[:len(got)-len(tooLong)], []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 && !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":7,`)) && !bytes.HasPrefix(line, []byte(`"result"`)) {
			if _, err := jsonrpc.DecodeMessage(line); err != nil {
				t.Errorf("the SDK cannot read %.100q: %v", line, err)
			}
		}
	}
}
