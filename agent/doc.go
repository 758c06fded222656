// Package agent wires Countersign's core: the gate (agent/gate), which
// checks, decides, records and executes every tool call exactly once, and
// the run loop (agent/runloop), which talks to a model, hands each call it
// asks for to the gate, pauses while a person decides and resumes after.
// The run loop asks the gate through runloop.Gate; the gate tells what
// settled through gate.Runs. The policy engine is in agent/policy, the
// models in agent/llm, staff accounts in agent/accounts, audit checkpoints
// in agent/audit. It knows nothing of HTTP or HTML. ARCHITECTURE.md follows
// a call through it.
package agent
