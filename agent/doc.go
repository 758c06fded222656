// Package agent is Countersign's core: the gate that validates, decides,
// records and executes every tool call; the policy engine that decides; and
// the approval flow. It knows nothing of HTTP or HTML.
package agent
