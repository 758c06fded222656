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

// SameCallWindow bounds the calls an agent's identical request can join:
// made within it, and, once their outcome came, undelivered for at most
// SameOutcomeWindow.
const (
	SameCallWindow    = 7 * 24 * time.Hour
	SameOutcomeWindow = time.Hour
)
