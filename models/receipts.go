package models

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// ReceiptVersion is the version of the receipt payload this code signs for
// a call of audit chain 0; ReceiptVersionChained for a call of another
// chain, whose audit names the chain too (version 1 has no chain: 0).
const (
	ReceiptVersion        = 1
	ReceiptVersionChained = 2
)

// Receipt is the signed receipt of a call that reached a final status: a
// JWS (compact, EdDSA) over the canonical JSON of its ReceiptPayload. One
// per final call, written once.
type Receipt struct {
	CallID    string `gorm:"primaryKey;size:40"`
	KeyID     string `gorm:"size:64"`
	JWS       string `gorm:"type:text"`
	CreatedAt time.Time
}

// ReceiptRecords are a call's records as a unit of work wrote them, every
// one: the call as stored and its audit events in order. A receipt signed
// in that unit is made of them instead of reading them back.
type ReceiptRecords struct {
	Call   *ToolCall
	Events []AuditEvent
}

// ReceiptKey is a key that signs receipts. The newest that has a private
// half signs; every one stays published (GET /api/v1/receipts/keys) so
// that receipts signed before a rotation still verify. Private is empty
// for the audit key given with --audit-key, kept outside the database.
type ReceiptKey struct {
	ID        string `gorm:"primaryKey;size:64"` // the JWS kid
	Public    string `gorm:"type:text"`          // base64url, 32 bytes (Ed25519)
	Private   string `gorm:"type:text;default:''"`
	CreatedAt time.Time
}

// ReceiptPayload is what a receipt signs, as canonical JSON (RFC 8785).
// The fields of it and of the types in it are declared in the order of
// their JSON names, which is the canonical order: the receipt's signer
// writes them straight (agent/receipts.Canonical).
type ReceiptPayload struct {
	// Audit is the call's last audit event: the chain vouches for it.
	Audit    ReceiptAudit `json:"audit"`
	Call     string       `json:"call"`
	Envelope Envelope     `json:"envelope"`
	// ErrorDigest is the SHA-256 (hex) of the error text; ResultDigest of
	// the result exactly as stored and returned (the call's `result`).
	ErrorDigest  string       `json:"error_digest,omitempty"`
	ResultDigest string       `json:"result_digest,omitempty"`
	SignedAt     time.Time    `json:"signed_at"`
	Status       CallStatus   `json:"status"`
	Times        ReceiptTimes `json:"times"`
	Version      int          `json:"v"`
}

// ReceiptTimes are when the call was asked, decided, started and finished
// (what did not happen is left out).
type ReceiptTimes struct {
	Asked    time.Time  `json:"asked"`
	Decided  *time.Time `json:"decided,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
}

// ReceiptAudit names an audit event: its chain (version 2), hash and
// sequence number.
type ReceiptAudit struct {
	Chain int64  `json:"chain,omitempty"`
	Hash  string `json:"hash"`
	Seq   int64  `json:"seq"`
}

// Envelope is what a decision was about: the tool and the digest of its
// definition, the digest of the normalized arguments, who asked (the
// agent, its session, the customer), the policy version and rule that
// decided, and each person's verdict.
type Envelope struct {
	Agent string `json:"agent,omitempty"` // the outside agent's id; "" for Countersign's own run loop
	// Approvals are the people's verdicts, in order.
	Approvals  []EnvelopeApproval `json:"approvals"`
	ArgsDigest string             `json:"args_digest"`
	// AskedBy is who asked, as the audit names them ("model", or
	// "agent:<name>" with the OAuth client that came for it).
	AskedBy       string `json:"asked_by"`
	Customer      string `json:"customer,omitempty"`
	Decision      string `json:"decision"`
	PolicyVersion string `json:"policy_version,omitempty"`
	Required      int    `json:"required_approvals,omitempty"`
	RequiredRole  string `json:"required_role,omitempty"`
	Rule          string `json:"rule,omitempty"`
	Run           string `json:"run"`
	Session       string `json:"session,omitempty"`
	Tool          string `json:"tool"`
	ToolDigest    string `json:"tool_digest"`
}

// EnvelopeApproval is one person's verdict as the envelope keeps it:
// ArgsDigest is of the arguments it was given on, ToolDigest and
// PolicyVersion what was in force then, SeenDigest the SHA-256 of what the
// person was shown ("" none), Passkey their passkey's signature over it
// when the rule asked for one.
type EnvelopeApproval struct {
	ArgsDigest    string            `json:"args_digest"`
	At            time.Time         `json:"at"`
	Name          string            `json:"name"`
	Passkey       *PasskeySignature `json:"passkey,omitempty"`
	PolicyVersion string            `json:"policy_version,omitempty"`
	Role          StaffRole         `json:"role"`
	SeenDigest    string            `json:"seen_digest,omitempty"`
	Staff         string            `json:"staff"`
	ToolDigest    string            `json:"tool_digest,omitempty"`
	Verdict       string            `json:"verdict"`
}

// Digest is the SHA-256 (hex) of s; "" for "".
func Digest(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
