package models

// The payloads of audit events that other parts read back (the outbox, the
// pages), each a type. The chain stores and hashes a payload's text as it
// is encoded (encodePayload), so any field order is as good as another.

// RunStatusChanged is the payload of EventRunStatus.
type RunStatusChanged struct {
	Error string    `json:"error"`
	From  RunStatus `json:"from"`
	To    RunStatus `json:"to"`
}
