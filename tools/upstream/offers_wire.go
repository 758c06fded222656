package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/tools/rawjson"
)

// ListPages lists what a server offers page by page (list asks for the
// page at cursor, with the context given: through KeepingResults, or an
// upstream's own transport), handing each entry and its bytes as listed
// (nil: not known) to each; key is the list's key in the result.
func ListPages[T any](ctx context.Context, key string, list func(context.Context, string) ([]T, string, error), each func(T, json.RawMessage)) error {
	cursor := ""
	for page := 0; page == 0 || cursor != ""; page++ {
		if page == maxPages {
			return fmt.Errorf("more than %d pages", maxPages)
		}
		pctx, r := withRawResult(ctx)
		got, next, err := list(pctx, cursor)
		if err != nil {
			return err
		}
		wire := listedIn(r.bytes(), key, len(got))
		for i, v := range got {
			each(v, wire[i])
		}
		cursor = next
	}
	return nil
}

// listedIn is each entry of a list result's key in the bytes it came in
// (nil each when they are not known, or not n of them).
func listedIn(result []byte, key string, n int) []json.RawMessage {
	var l map[string]json.RawMessage
	var entries []json.RawMessage
	if result == nil || !utf8.Valid(result) || json.Unmarshal(result, &l) != nil ||
		json.Unmarshal(l[key], &entries) != nil || len(entries) != n {
		return make([]json.RawMessage, n)
	}
	return entries
}

// renamed is an entry's bytes with its name member name (nil: wire nil, or
// not an object with a name).
func renamed(wire json.RawMessage, name string) json.RawMessage {
	o, err := rawjson.ReadObject(wire)
	if err != nil {
		return nil
	}
	at, ok := o.Members["name"]
	if !ok {
		return nil
	}
	var was string
	if json.Unmarshal(wire[at.Start:at.End], &was) != nil {
		return nil
	}
	if was == name {
		return wire
	}
	to, err := json.Marshal(name)
	if err != nil {
		return nil
	}
	out := append(append(append([]byte(nil), wire[:at.Start]...), to...), wire[at.End:]...)
	return out
}

// withOthers is o, a listing asked for because the server said one list
// changed (which: ListPrompts or ListResources, with the templates), with
// what prev had of the others. At 2026-07-28 the SDK answers a list the
// server did not say changed from its cache (SEP-2549's ttlMs), without
// the bytes it came in: taken as listed, it would look changed.
func (o Offers) withOthers(prev Offers, which string) Offers {
	said := map[string]bool{"prompt": which == ListPrompts, "resource": which == ListResources, "template": which == ListResources}
	if which != ListPrompts {
		o.Prompts = prev.Prompts
	}
	if which != ListResources {
		o.Resources, o.Templates = prev.Resources, prev.Templates
	}
	wire := map[string]json.RawMessage{}
	for _, from := range []struct {
		w    map[string]json.RawMessage
		said bool
	}{{o.Wire, true}, {prev.Wire, false}} {
		for key, v := range from.w {
			if kind, _, _ := strings.Cut(key, "\x00"); said[kind] == from.said {
				wire[key] = v
			}
		}
	}
	o.Wire = wire
	return o
}
