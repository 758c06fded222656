package receipts

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/go-jose/go-jose/v4"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/models"
)

// BundleVersion is the version of the evidence bundle this code writes for
// a call of chain 0 anchored by a checkpoint of version 1 (or none);
// BundleVersionChained for the others, whose anchor comes with the
// inclusion of the call's chain.
const (
	BundleVersion        = 1
	BundleVersionChained = 2
)

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
	// Links are the audit events of the call's chain from the call's
	// first event to the anchor, in order: the call's own events are those
	// whose subject is the call.
	Links []models.AuditEvent `json:"links"`
	// Checkpoint is the signed checkpoint the links end at, with the
	// public key that signed it (base64url, Ed25519); nil when none was
	// written yet: the links then end at the chain's head, which only the
	// receipt's signature vouches for. An anchor (version 2) comes without
	// its heads, and Inclusion proves the call's chain's head is among
	// them.
	Checkpoint    *audit.Checkpoint `json:"checkpoint,omitempty"`
	CheckpointKey string            `json:"checkpoint_key,omitempty"`
	Inclusion     *audit.Inclusion  `json:"inclusion,omitempty"`
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
	chain, from, last := own[0].Chain, own[0].Seq, own[len(own)-1].Seq
	if to, err := b.anchor(ctx, s, chain, last, checkpoints, checkpointKey); err != nil {
		return nil, err
	} else if to-from+1 > MaxLinks {
		return nil, fmt.Errorf("call %s is %d events from its anchor, more than a bundle carries (%d): write a checkpoint (countersign audit checkpoint) and ask again", callID, to-from+1, MaxLinks)
	} else if b.Links, err = s.store.AuditEventsBetween(ctx, chain, from, to); err != nil {
		return nil, err
	}
	if chain != 0 {
		b.Version = BundleVersionChained
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

// anchor picks what the links of the call's chain end at: the first
// checkpoint that names its last event or a later one (an anchor with the
// chain's inclusion), else the chain's head now. It returns the last
// link's number.
func (b *Bundle) anchor(ctx context.Context, s *Signer, chain, last int64, checkpoints string, key ed25519.PublicKey) (int64, error) {
	cp, err := audit.FirstAtOrAfter(checkpoints, chain, last)
	if err != nil {
		return 0, err
	}
	if cp != nil && key != nil {
		b.Checkpoint, b.CheckpointKey = cp, base64.RawURLEncoding.EncodeToString(key)
		if cp.Version != 2 {
			return cp.Seq, nil
		}
		i := slices.IndexFunc(cp.Heads, func(h models.ChainHead) bool { return h.Chain == chain })
		if b.Inclusion, err = audit.Include(cp.Heads, i); err != nil {
			return 0, err
		}
		bare := *cp
		bare.Heads = nil // the inclusion proves the one head the bundle needs
		b.Checkpoint, b.Version = &bare, BundleVersionChained
		return b.Inclusion.Head.Seq, nil
	}
	heads, err := s.store.AuditHeadsNow(ctx)
	if err != nil {
		return 0, err
	}
	for _, h := range heads {
		if h.Chain == chain && h.Seq > last {
			return h.Seq, nil
		}
	}
	return last, nil
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
			fail("audit %s: its content does not hash to %s (it was altered)", models.EventName(e.Chain, e.Seq), short(e.Hash))
		}
		if i > 0 {
			prev := b.Links[i-1]
			if e.Chain != prev.Chain {
				fail("audit %s: follows an event of chain %d (the links are of one chain)", models.EventName(e.Chain, e.Seq), prev.Chain)
			} else if e.Seq != prev.Seq+1 {
				fail("audit %s: follows event %d (a link is missing)", models.EventName(e.Chain, e.Seq), prev.Seq)
			} else if e.PrevHash != prev.Hash {
				fail("audit %s: does not link to event %d (the chain is broken there)", models.EventName(e.Chain, e.Seq), prev.Seq)
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
		if len(b.Links) > 0 && b.Links[0].Chain != p.Audit.Chain {
			fail("receipt: names an event of chain %d; the links are of chain %d", p.Audit.Chain, b.Links[0].Chain)
		}
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
// event the links end with (an anchor's: through the chain's inclusion in
// the root it signed).
func checkAnchor(b *Bundle, byseq map[int64]models.AuditEvent, fail func(string, ...any)) {
	if b.Checkpoint == nil {
		return
	}
	pub, err := base64.RawURLEncoding.DecodeString(b.CheckpointKey)
	switch {
	case err != nil || len(pub) != ed25519.PublicKeySize:
		fail("checkpoint: its public key is not an Ed25519 key")
	case !b.Checkpoint.Valid(ed25519.PublicKey(pub)):
		fail("checkpoint: its signature does not verify (it was altered, or another key signed it)")
	}
	head := models.ChainHead{Seq: b.Checkpoint.Seq, Hash: b.Checkpoint.Hash}
	if b.Checkpoint.Version == 2 {
		if b.Inclusion == nil {
			fail("checkpoint: an anchor comes with the inclusion of the call's chain; the bundle has none")
			return
		}
		if err := b.Inclusion.Verify(b.Checkpoint.Root); err != nil {
			fail("checkpoint: the head of chain %d is not among those the anchor signed (%v)", b.Inclusion.Head.Chain, err)
		}
		head = b.Inclusion.Head
	}
	if len(b.Links) == 0 {
		return
	}
	end := b.Links[len(b.Links)-1]
	if end.Chain != head.Chain || end.Seq != head.Seq {
		fail("checkpoint: names %s; the links end at %s", models.EventName(head.Chain, head.Seq), models.EventName(end.Chain, end.Seq))
	} else if e, ok := byseq[head.Seq]; ok && e.Hash != head.Hash {
		fail("checkpoint: names %s with hash %s; the links have %s", models.EventName(head.Chain, head.Seq), short(head.Hash), short(e.Hash))
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
