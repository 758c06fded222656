package web

import (
	"bytes"
	"encoding/json"

	"github.com/countersign/countersign/web/mcpgate"
)

// toolsAsListed is a tools/list result with each tool of an upstream MCP
// server in the bytes the server's list held it (but for the name
// Countersign offers it under) instead of the SDK's encoding of it, which
// drops keys it does not know and adds some of its own; tasks: a
// 2025-11-25 session, told that each tool may be called as a task
// (execution.taskSupport "optional", unless the tool says otherwise).
// wire is a tool's bytes by the name offered (nil: the SDK's are right).
func toolsAsListed(res map[string]json.RawMessage, wire func(string) json.RawMessage, tasks bool) bool {
	var list []json.RawMessage
	if json.Unmarshal(res["tools"], &list) != nil {
		return false
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, t := range list {
		if i > 0 {
			out.WriteByte(',')
		}
		var keys map[string]json.RawMessage
		t = bytes.TrimSpace(t)
		if json.Unmarshal(t, &keys) != nil || len(keys) == 0 {
			out.Write(t) // the tool as it was listed, untouched
			continue
		}
		var name string
		_ = json.Unmarshal(keys["name"], &name)
		if w := wire(name); w != nil {
			t, keys = w, nil
			_ = json.Unmarshal(w, &keys)
		}
		if !tasks || keys["execution"] != nil {
			out.Write(t)
			continue
		}
		out.Write(t[:len(t)-1])
		if len(keys) > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`"execution":{"taskSupport":"optional"}}`)
	}
	out.WriteByte(']')
	res["tools"] = out.Bytes()
	return true
}

// wireOf is the tool offered under name in the bytes its server listed it
// to clients of the revisions with sessions (modern false) or without
// (nil: not an upstream's, or its bytes are not known).
func (ep *mcpEndpoint) wireOf(name string, modern bool) json.RawMessage {
	t, ok := ep.gw.Outside.Gate.Tools().Get(name)
	if !ok || !t.Executes() || !mcpgate.OfferedAt(t, modern) {
		return nil
	}
	return mcpgate.Wire(t, modern)
}
