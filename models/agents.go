package models

import (
	"time"
)

// AgentLimits are an agent's own limits (0: the instance's).
type AgentLimits struct {
	CallsPerSecond, CallBurst, MaxWaiting int
}

// RevokedAgentReason is what a waiting action of an agent whose key was
// revoked is cancelled with.
const RevokedAgentReason = "the agent that asked for it was revoked"

// SameCallWindow bounds the waiting calls an agent's identical request
// can join: made within it. A call a person decided is the answer to the
// same intent for the intent window after it ended (IntentWindow).
const SameCallWindow = 7 * 24 * time.Hour

// IntentWindow is how long after a call a person decided ended the same
// intent (agent, tool, normalized arguments, customer) asked again is
// answered with its outcome, by default (serve --intent-window; as long
// as Stripe keeps idempotency keys).
const IntentWindow = 24 * time.Hour
