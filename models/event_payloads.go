package models

// The payloads of audit events that other parts read back (the outbox, the
// pages), each a type. Fields are declared in the order of their JSON
// names: the chain stores payloads with sorted keys, as a map would give.

// RunStatusChanged is the payload of EventRunStatus.
type RunStatusChanged struct {
	Error string    `json:"error"`
	From  RunStatus `json:"from"`
	To    RunStatus `json:"to"`
}
