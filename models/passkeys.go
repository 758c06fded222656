package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/countersign/countersign/models/fault"
)

// Passkey is a WebAuthn credential a person registered: it signs them in,
// and signs their decisions on actions whose rule asks for it.
type Passkey struct {
	// ID is the credential's id, base64url.
	ID      string `gorm:"primaryKey;size:400"`
	StaffID string `gorm:"size:40;index;not null"`
	Name    string `gorm:"size:100"`
	// RPID is the relying party the credential belongs to (the back
	// office's host name).
	RPID string `gorm:"size:200"`
	// Credential is go-webauthn's credential record (JSON): the public key,
	// its algorithm, the signature counter, the flags.
	Credential string `gorm:"type:text"`
	CreatedAt  time.Time
	LastUsedAt *time.Time
	// RemovedAt is when it stopped working (removed, or its account
	// reset). The record stays: its public key checks the signatures it
	// made before (audit verify).
	RemovedAt *time.Time
}

// PasskeySignature is a person's passkey assertion over one decision: the
// WebAuthn challenge is the SHA-256 of PasskeyBinding's canonical text, so
// the signature is over the call, the arguments decided on, the verdict
// and the summary the page showed. It is kept with the approval
// (Approval.Passkey) and checked again by `audit verify`.
type PasskeySignature struct {
	CredentialID  string `json:"credential_id"`
	RPID          string `json:"rp_id"`
	Origin        string `json:"origin"`
	CallID        string `json:"call_id"`
	ArgsHash      string `json:"args_hash"`
	Verdict       string `json:"verdict"`
	SummaryDigest string `json:"summary_digest"`
	Nonce         string `json:"nonce"`
	// Assertion is the browser's PublicKeyCredential, as it sent it (JSON).
	Assertion string `json:"assertion"`
}

// SummaryDigest is the SHA-256 (hex) of the summary text a decision's page
// showed.
func SummaryDigest(summary string) string {
	sum := sha256.Sum256([]byte(summary))
	return hex.EncodeToString(sum[:])
}

// DecisionChallenge is the WebAuthn challenge of a decision: the SHA-256
// of its canonical text. Anyone can make it again from the record.
func DecisionChallenge(callID, argsHash, verdict, summaryDigest, nonce string) []byte {
	sum := sha256.Sum256([]byte("countersign decision v1\ncall " + callID + "\nargs " + argsHash + "\nverdict " + verdict +
		"\nsummary " + summaryDigest + "\nnonce " + nonce))
	return sum[:]
}

// PolicySubject is what a passkey signature on a policy version names.
func PolicySubject(id int64) string { return "policy-version:" + strconv.FormatInt(id, 10) }

// ErrPasskeyNeeded refuses an approval without the passkey signature the
// deployment or the rule asks for.
var ErrPasskeyNeeded = fault.Errorf(fault.Forbidden, "this approval needs a passkey signature: approve it in the back office")

// ErrPasskeyOther refuses a passkey signature over something else.
var ErrPasskeyOther = fault.Errorf(fault.Conflict, "your passkey signed something else than this (it changed meanwhile, or it is another one): open it again and sign what it says now")

// SignedOver checks a passkey signature (already checked against the
// person's passkey) is an approval of subject with digest, and returns it
// as kept; with none, needed says whether that is refused.
func SignedOver(sig *PasskeySignature, needed bool, subject, digest string) (string, error) {
	if sig == nil {
		if needed {
			return "", ErrPasskeyNeeded
		}
		return "", nil
	}
	if sig.CallID != subject || sig.ArgsHash != digest || sig.Verdict != "approve" {
		return "", ErrPasskeyOther
	}
	body, err := json.Marshal(sig)
	return string(body), err
}
