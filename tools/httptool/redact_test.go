package httptool

import (
	"strings"
	"testing"
)

// A document that only seems to be JSON (text after it, cut short, not
// JSON at all) still has every secret hidden.
func TestSecretsAreHiddenInWhatIsNotJSON(t *testing.T) {
	r := &redactor{}
	r.add("tok<&>é/1")
	for _, in := range []string{`{"a":"x"} tok<&>é/1`, `{"a":"tok<&>é/1`, `tok<&>é/1`, `[1,2 tok\u003c\u0026\u003e\u00e9/1]`, `{"a":1}{"b":"tok<&>é/1"}`} {
		if out := string(r.json([]byte(in))); strings.Contains(out, "tok") {
			t.Errorf("%s became %s", in, out)
		}
	}
}

// BenchmarkRedactBigResult hides a file's secret in an MCP server's 3 MB
// text or image result that does not hold it (what every result of a server whose entry
// has a ${NAME} goes through): in its bytes (json), and decoded and encoded
// again (decoded, as before):
//
//	go test -tags=sqlite_fts5 -run XXX -bench RedactBigResult ./tools/httptool
func BenchmarkRedactBigResult(b *testing.B) {
	r := &redactor{}
	r.add("sk-live-0123456789abcdef")
	text := strings.Repeat(`a line of a big file, with <tags> & \"quotes\"\n`, 3<<20/48)
	image := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 3<<20/24)
	for kind, raw := range map[string][]byte{
		"text":  []byte(`{"content":[{"type":"text","text":"` + text + `"}],"structuredContent":{"n":1,"s":"x"}}`),
		"image": []byte(`{"content":[{"type":"image","mimeType":"image/png","data":"` + image + `"}]}`),
	} {
		b.Run(kind+"/json", func(b *testing.B) {
			for b.Loop() {
				r.json(raw)
			}
		})
		b.Run(kind+"/decoded", func(b *testing.B) {
			for b.Loop() {
				r.decoded(raw)
			}
		})
	}
}
