// Package agent is Countersign's core: the gate that checks, decides,
// records and executes every tool call exactly once (gate.go, approve.go),
// the quorum rule for approvals (quorum.go), and the run loop that talks to
// a model, pauses while a person decides and resumes after (runner*.go).
// The policy engine is in agent/policy, the models in agent/llm, staff
// accounts in agent/accounts, audit checkpoints in agent/audit. It knows
// nothing of HTTP or HTML. ARCHITECTURE.md follows a call through it.
package agent
