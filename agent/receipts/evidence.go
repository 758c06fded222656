package receipts

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/go-jose/go-jose/v4"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/models"
)

// BundleVersion is the version of the evidence bundle this code writes.
const BundleVersion = 1

// MaxLinks bounds the audit events one bundle carries from the call to its
// anchor: a call further than that from a checkpoint is bundled once a
// checkpoint nearer to it is written.
const MaxLinks = 200_000

// Bundle is one call's evidence, checkable with no database and no
// network (Check; `countersign evidence verify FILE`): its receipt and the
// keys that signed it, the audit events from the call's first to the
// anchor (a signed checkpoint at or after the call's last event, else the
// chain's head when the bundle was made), and the passkeys whose
// signatures its approvals carry.
type Bundle struct {
	Version int    `json:"version"`
	Call    string `json:"call"`
	Receipt string `json:"receipt"`
	// Keys are the receipt keys (a JWK Set).
	Keys jose.JSONWebKeySet `json:"keys"`
	// Links are the audit events from the call's first event to the
	// anchor, in order: the call's own events are those whose subject is
	// the call.
	Links []models.AuditEvent `json:"links"`
	// Checkpoint is the signed checkpoint the links end at, with the
	// public key that signed it (base64url, Ed25519); nil when none was
	// written yet: the links then end at the chain's head, which only the
	// receipt's signature vouches for.
	Checkpoint    *audit.Checkpoint `json:"checkpoint,omitempty"`
	CheckpointKey string            `json:"checkpoint_key,omitempty"`
	// Passkeys are the credentials whose signatures the approvals carry.
	Passkeys []models.Passkey `json:"passkeys"`
}

// Evidence makes a final call's bundle. Checkpoints is the directory the
// deployment writes checkpoints to ("" none), signed by checkpointKey.
func (s *Signer) Evidence(ctx context.Context, callID, checkpoints string, checkpointKey ed25519.PublicKey) (*Bundle, error) {
	r, err := s.For(ctx, callID)
	if err != nil {
		return nil, err
	}
	keys, err := s.Keys(ctx)
	if err != nil {
		return nil, err
	}
	own, err := s.store.AuditEventsFor(ctx, callID)
	if err != nil || len(own) == 0 {
		return nil, fmt.Errorf("the audit events of %s: %v", callID, err)
	}
	b := &Bundle{Version: BundleVersion, Call: callID, Receipt: r.JWS, Keys: keys, Passkeys: []models.Passkey{}}
	from, last := own[0].Seq, own[len(own)-1].Seq
	to := last
	if cp, err := audit.FirstAtOrAfter(checkpoints, last); err != nil {
		return nil, err
	} else if cp != nil && checkpointKey != nil {
		b.Checkpoint, b.CheckpointKey, to = cp, base64.RawURLEncoding.EncodeToString(checkpointKey), cp.Seq
	} else if head, _, err := s.store.AuditHeadNow(ctx); err == nil && head > to {
		to = head
	}
	if to-from+1 > MaxLinks {
		return nil, fmt.Errorf("call %s is %d events from its anchor, more than a bundle carries (%d): write a checkpoint (countersign audit checkpoint) and ask again", callID, to-from+1, MaxLinks)
	}
	if b.Links, err = s.store.AuditEventsBetween(ctx, from, to); err != nil {
		return nil, err
	}
	approvals, err := s.store.Approvals(ctx, callID)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, a := range approvals {
		if a.Passkey == "" {
			continue
		}
		var sig models.PasskeySignature
		if err := json.Unmarshal([]byte(a.Passkey), &sig); err != nil || seen[sig.CredentialID] {
			continue
		}
		seen[sig.CredentialID] = true
		pk, err := s.store.PasskeyByID(ctx, sig.CredentialID)
		if err != nil {
			return nil, fmt.Errorf("the passkey %s: %w", sig.CredentialID, err)
		}
		b.Passkeys = append(b.Passkeys, *pk)
	}
	return b, nil
}

// Check verifies a bundle offline and names every failure: the receipt's
// signature (with the bundle's keys, or with pinned ones when given), the
// chain links from the call to the anchor, the receipt's last event in
// them, the checkpoint's signature and the event it names, the call's
// events against the receipt, and every passkey signature.
func Check(b *Bundle, pinned *jose.JSONWebKeySet) (models.ReceiptPayload, []string) {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	keys := b.Keys
	if pinned != nil {
		keys = *pinned
	}
	p, _, err := Verify(b.Receipt, keys)
	if err != nil {
		fail("receipt: %v", err)
	}
	if err == nil && p.Call != b.Call {
		fail("receipt: it is the receipt of call %s, the bundle says %s", p.Call, b.Call)
	}
	// The links: each hashes to what it says, and follows the one before.
	byseq := map[int64]models.AuditEvent{}
	for i, e := range b.Links {
		if h := models.EventHash(e); h != e.Hash {
			fail("audit event %d: its content does not hash to %s (it was altered)", e.Seq, short(e.Hash))
		}
		if i > 0 {
			prev := b.Links[i-1]
			if e.Seq != prev.Seq+1 {
				fail("audit event %d: follows event %d (a link is missing)", e.Seq, prev.Seq)
			} else if e.PrevHash != prev.Hash {
				fail("audit event %d: does not link to event %d (the chain is broken there)", e.Seq, prev.Seq)
			}
		}
		byseq[e.Seq] = e
	}
	if len(b.Links) == 0 {
		fail("links: the bundle carries no audit events")
	}
	// The call's own events, and the receipt's last one among them.
	var own []models.AuditEvent
	for _, e := range b.Links {
		if e.Subject == b.Call {
			own = append(own, e)
		}
	}
	if len(own) == 0 {
		fail("links: no audit event is about call %s", b.Call)
	}
	if err == nil {
		if e, ok := byseq[p.Audit.Seq]; !ok {
			fail("receipt: its last audit event %d is not among the links", p.Audit.Seq)
		} else if e.Hash != p.Audit.Hash {
			fail("receipt: names event %d with hash %s; the links have %s", p.Audit.Seq, short(p.Audit.Hash), short(e.Hash))
		} else if e.Subject != b.Call {
			fail("receipt: its last audit event %d is about %s, not the call", e.Seq, e.Subject)
		}
		if len(own) > 0 && own[len(own)-1].Seq != p.Audit.Seq {
			fail("links: the call has event %d after the one its receipt names (%d)", own[len(own)-1].Seq, p.Audit.Seq)
		}
	}
	checkAnchor(b, byseq, fail)
	if err == nil {
		checkPasskeys(b, p, fail)
	}
	return p, problems
}

// checkAnchor checks the bundle's checkpoint: signed by its key, at the
// event the links end with.
func checkAnchor(b *Bundle, byseq map[int64]models.AuditEvent, fail func(string, ...any)) {
	if b.Checkpoint != nil {
		pub, err := base64.RawURLEncoding.DecodeString(b.CheckpointKey)
		switch {
		case err != nil || len(pub) != ed25519.PublicKeySize:
			fail("checkpoint: its public key is not an Ed25519 key")
		case !b.Checkpoint.Valid(ed25519.PublicKey(pub)):
			fail("checkpoint: its signature does not verify (it was altered, or another key signed it)")
		}
		if len(b.Links) > 0 && b.Links[len(b.Links)-1].Seq != b.Checkpoint.Seq {
			fail("checkpoint: names event %d; the links end at %d", b.Checkpoint.Seq, b.Links[len(b.Links)-1].Seq)
		} else if e, ok := byseq[b.Checkpoint.Seq]; ok && e.Hash != b.Checkpoint.Hash {
			fail("checkpoint: names event %d with hash %s; the links have %s", b.Checkpoint.Seq, short(b.Checkpoint.Hash), short(e.Hash))
		}
	}
}

// checkPasskeys checks the approvers' passkey signatures in the receipt
// with the credentials' public keys the bundle carries.
func checkPasskeys(b *Bundle, p models.ReceiptPayload, fail func(string, ...any)) {
	creds := map[string]models.Passkey{}
	for _, k := range b.Passkeys {
		creds[k.ID] = k
	}
	for _, a := range p.Envelope.Approvals {
		if a.Passkey == nil {
			continue
		}
		k, ok := creds[a.Passkey.CredentialID]
		if !ok {
			fail("passkey of %s: the bundle does not carry credential %s", a.Name, short(a.Passkey.CredentialID))
			continue
		}
		if err := accounts.CheckSignature(*a.Passkey, k, p.Call, a.ArgsDigest, a.Verdict); err != nil {
			fail("passkey of %s: %v", a.Name, err)
		}
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}
