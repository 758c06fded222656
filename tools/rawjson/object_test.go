package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestReadObjectFindsEachMemberInItsBytes(t *testing.T) {
	b := []byte(" {\"content\" : [ {\"type\":\"text\",\"text\":\"a \\\"}\\\" ]\"} ] ,\n\"n\":-0.5e3,\"t\":true,\"nil\":null,\n" +
		"\"caf\\u00e9\":{\"deep\":[[{}]]},\"s\":\"\u2028<&>\",\"n\":1 } \n")
	o, err := ReadObject(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"content": `[ {"type":"text","text":"a \"}\" ]"} ]`,
		"n":       `1`, // a key given twice: the last
		"t":       `true`,
		"nil":     `null`,
		"café":    `{"deep":[[{}]]}`,
		"s":       "\"\u2028<&>\"",
	}
	if len(o.Members) != len(want) || o.Keys != 7 {
		t.Fatalf("found %d members (%d given): %v", len(o.Members), o.Keys, o.Members)
	}
	for k, v := range want {
		if got := string(o.Value(b, k)); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
	if o.Value(b, "missing") != nil {
		t.Error("a missing member has a value")
	}
	if b[o.Closing] != '}' || strings.TrimSpace(string(b[o.Closing+1:])) != "" {
		t.Errorf("closing brace at %d: %q", o.Closing, b[o.Closing:])
	}
	if o, err := ReadObject([]byte(`{ }`)); err != nil || o.Keys != 0 || o.Closing != 2 {
		t.Errorf("empty object: %+v, %v", o, err)
	}
}

func TestReadObjectRefusesWhatIsNotOneObject(t *testing.T) {
	for _, bad := range []string{``, ` `, `[]`, `"x"`, `1`, `{`, `{"a":1} {}`, `{"a":1}x`, `{"a":1}}`, `{"a":1,}`,
		`{,"a":1}`, `{"a":,"b":1}`, `{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a":[}`, `{"a":[]]`, `{"a":tru}`,
		`{"a":"\x"}`, `{"a":"unterminated}`, `{"a":1:2}`} {
		if o, err := ReadObject([]byte(bad)); err == nil {
			t.Errorf("%q was read as an object: %+v", bad, o)
		}
	}
}

// A big result: the reader runs over a 2 MB string a block at a time.
func BenchmarkReadObjectOfABigResult(b *testing.B) {
	image := bytes.Repeat([]byte("QUJD"), 512<<10)
	res := []byte(`{"content":[{"type":"image","mimeType":"image/png","data":"` + string(image) + `"}],"_meta":{"k":1}}`)
	b.Run("rawjson", func(b *testing.B) {
		b.SetBytes(int64(len(res)))
		for b.Loop() {
			if _, err := ReadObject(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json-decoder", func(b *testing.B) { // what splice did before
		b.SetBytes(int64(len(res)))
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(res))
			if _, err := dec.Token(); err != nil {
				b.Fatal(err)
			}
			for dec.More() {
				if _, err := dec.Token(); err != nil {
					b.Fatal(err)
				}
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func TestTextsSplitsJSONTextsOneAfterAnother(t *testing.T) {
	b := []byte("{\"a\":\"}{\"}\n{\"b\":[1,{\"c\":2}]} \"s\" 3\r\n[4]{}")
	got, err := Texts(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":"}{"}`, `{"b":[1,{"c":2}]}`, `"s"`, `3`, `[4]`, `{}`}
	if len(got) != len(want) {
		t.Fatalf("%d texts: %q", len(got), got)
	}
	for i, w := range want {
		if string(got[i]) != w {
			t.Errorf("text %d = %s, want %s", i, got[i], w)
		}
	}
	if one, err := Texts([]byte(" {\"x\":1} \n")); err != nil || len(one) != 1 || string(one[0]) != `{"x":1}` {
		t.Errorf("one text: %q, %v", one, err)
	}
	for _, bad := range []string{"", " ", "{} , {}", "{\"a\":1", "{}]", "nope"} {
		if got, err := Texts([]byte(bad)); err == nil {
			t.Errorf("%q: %q, want an error", bad, got)
		}
	}
}
