package tools

import "time"

// UpstreamStatus is how a server that offers tools from outside (an MCP
// server of the tools file) is doing, for the people who run Countersign.
type UpstreamStatus struct {
	Name string
	// Via is how it is reached: the command it runs, or its URL (with
	// no secrets).
	Via       string
	Connected bool
	// Since is when it connected or went away.
	Since time.Time
	// Error is why it is not connected, or what went wrong last.
	Error string
	// Tools counts the tools it offers (the last list it gave).
	Tools int
	// Skipped names tools it offers that Countersign does not, and why.
	Skipped []string
	// What it offers besides tools, passed through to agents over MCP:
	// prompts, resources, resource templates, completions; Off names
	// what the tools file turned off.
	Prompts, Resources, Templates int
	Completions                   bool
	Off                           []string
	// OverHTTP: reached over streamable HTTP (else stdio), which says how
	// its messages during a call find the call's agent.
	OverHTTP bool
	// Modern: it is spoken to at 2026-07-28 as well as 2025-11-25, each
	// client at its own revision; ModernOnly and LegacyOnly count the
	// tools it lists at one of the two only.
	Modern                 bool
	ModernOnly, LegacyOnly int
	// Unlisted is the risk calls to tools it does not list are decided at
	// and then forwarded ("": refused as unknown tools); Prefix is what the
	// names of its tools begin with ("": prefix: false).
	Unlisted Risk
	Prefix   string
}
