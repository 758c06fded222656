// Package receipts signs a receipt for every call that reaches a final
// status: a JWS (RFC 7515, compact serialization, alg EdDSA, a kid header)
// whose payload is the canonical JSON (RFC 8785) of what was decided
// (models.Envelope), how it ended, when, and the call's last audit event.
// Anyone holding the public keys (GET /api/v1/receipts/keys, a JWK Set)
// checks one with any JOSE library, without asking this server.
//
// The key is --audit-key when the deployment gives one (kept outside the
// database: receipts then hold against whoever controls it), else a key
// this deployment makes and keeps in its database (receipt_keys). A
// rotation adds a key; every key that ever signed stays published.
package receipts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// Type is the JWS "typ" of a receipt.
const Type = "countersign-receipt+jws"

// ErrNotFinal answers a receipt asked for a call that is not over yet.
var ErrNotFinal = fault.Errorf(fault.Conflict, "the call is not final yet: its receipt is signed when it ends")

// Signer signs the receipts of the calls that reach a final status: at
// once for those it hears of (Store.SetFinished), and, every Sweep, for
// any final call left without one (a crash between the outcome and its
// receipt, a queue that overflowed).
type Signer struct {
	store *storage.Store
	log   *slog.Logger
	// audit is the --audit-key (nil: the deployment's own key).
	audit ed25519.PrivateKey

	mu  sync.Mutex
	key signingKey

	queue  chan string
	missed atomic.Bool
	// runs are the runs read lately, for the envelope (at most maxRuns:
	// emptied when full).
	runsMu sync.Mutex
	runs   map[string]*models.Run
	// signed are receipts signed with their call's outcome (SignWithin),
	// by call, until an answer takes them (Fresh); at most maxSigned.
	signed  sync.Map
	nSigned atomic.Int64
}

// maxSigned bounds the receipts signed with an outcome that wait for the
// answer that carries them (one that never asks leaves its receipt here).
const maxSigned = 4096

// maxRuns bounds the runs the signer keeps read.
const maxRuns = 10_000

type signingKey struct {
	id   string
	priv ed25519.PrivateKey
}

// Sweep is how often calls left without a receipt are looked for; Gather
// how long the signer collects the calls that ended before signing them
// (a receipt asked for sooner is signed at once).
const (
	Sweep     = 30 * time.Second
	FullSweep = 10 * time.Minute
	Gather    = 100 * time.Millisecond
)

// New loads the signing key (making the deployment's first when there is
// none and no audit key is given) and starts hearing of final calls.
func New(ctx context.Context, store *storage.Store, auditKey ed25519.PrivateKey, log *slog.Logger) (*Signer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Signer{store: store, log: log, audit: auditKey, queue: make(chan string, 4096)}
	if err := s.loadKey(ctx); err != nil {
		return nil, err
	}
	store.SetFinished(s.hear)
	return s, nil
}

// KeyID names a public key: "cs-" and the start of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "cs-" + hex.EncodeToString(sum[:8])
}

// loadKey picks the key that signs: the audit key, else the newest of the
// deployment's (made when there is none).
func (s *Signer) loadKey(ctx context.Context) error {
	if s.audit != nil {
		pub := s.audit.Public().(ed25519.PublicKey)
		id := KeyID(pub)
		if err := s.store.AddReceiptKey(ctx, models.ReceiptKey{ID: id, Public: base64.RawURLEncoding.EncodeToString(pub)}); err != nil {
			return fmt.Errorf("publish the audit key for receipts: %w", err)
		}
		s.setKey(signingKey{id: id, priv: s.audit})
		return nil
	}
	k, err := s.newestOwn(ctx)
	if err != nil {
		return err
	}
	if k.priv == nil {
		if _, err := s.Rotate(ctx); err != nil {
			return err
		}
		return nil
	}
	s.setKey(k)
	return nil
}

func (s *Signer) setKey(k signingKey) {
	s.mu.Lock()
	s.key = k
	s.mu.Unlock()
}

func (s *Signer) signing() signingKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// newestOwn is the newest key the deployment keeps the private half of.
func (s *Signer) newestOwn(ctx context.Context) (signingKey, error) {
	keys, err := s.store.ReceiptKeys(ctx)
	if err != nil {
		return signingKey{}, fmt.Errorf("read the receipt keys: %w", err)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i].Private == "" {
			continue
		}
		seed, err := base64.RawURLEncoding.DecodeString(keys[i].Private)
		if err != nil || len(seed) != ed25519.SeedSize {
			return signingKey{}, fmt.Errorf("the receipt key %s is damaged", keys[i].ID)
		}
		return signingKey{id: keys[i].ID, priv: ed25519.NewKeyFromSeed(seed)}, nil
	}
	return signingKey{}, nil
}

// Rotate makes a new deployment key and signs with it from now on (other
// instances take it at their next sweep); the old ones stay published. With
// an audit key, rotating is replacing --audit-key.
func (s *Signer) Rotate(ctx context.Context) (string, error) {
	if s.audit != nil {
		return "", fault.Errorf(fault.Conflict, "receipts are signed with --audit-key: rotate by starting with a new one (the old public key stays published)")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	id := KeyID(pub)
	err = s.store.AddReceiptKey(ctx, models.ReceiptKey{ID: id, Public: base64.RawURLEncoding.EncodeToString(pub),
		Private: base64.RawURLEncoding.EncodeToString(priv.Seed())})
	if err != nil {
		return "", fmt.Errorf("keep the new receipt key: %w", err)
	}
	s.setKey(signingKey{id: id, priv: priv})
	return id, nil
}

// Keys is every key that has signed receipts, as a JWK Set.
func (s *Signer) Keys(ctx context.Context) (jose.JSONWebKeySet, error) {
	return PublicKeys(ctx, s.store)
}

// PublicKeys reads the published keys from a store.
func PublicKeys(ctx context.Context, store *storage.Store) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	keys, err := store.ReceiptKeys(ctx)
	if err != nil {
		return set, err
	}
	for _, k := range keys {
		pub, err := base64.RawURLEncoding.DecodeString(k.Public)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			continue
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: ed25519.PublicKey(pub), KeyID: k.ID, Algorithm: string(jose.EdDSA), Use: "sig"})
	}
	if set.Keys == nil {
		set.Keys = []jose.JSONWebKey{}
	}
	return set, nil
}

// Kick makes the next sweep look at every final call: another instance
// stopped, and what it ended may be unsigned.
func (s *Signer) Kick() { s.missed.Store(true) }

// hear is the store's Finished hook: quick, never blocking.
func (s *Signer) hear(ids []string) {
	for _, id := range ids {
		select {
		case s.queue <- id:
		default:
			s.missed.Store(true) // the sweep finds it
		}
	}
}

// Run signs what it hears of, and every Sweep what was left unsigned, until
// ctx ends. It starts with a sweep: what a crash left.
func (s *Signer) Run(ctx context.Context) {
	s.Repair(ctx)
	t := time.NewTicker(Sweep)
	defer t.Stop()
	batch := make([]string, 0, 1024)
	sweeps := 0
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-s.queue:
			// Gather for a moment: one read and one write for many
			// receipts, and fewer turns on the store's one writer, which
			// the gate's own writes wait for.
			batch = append(batch[:0], id)
			gather := time.NewTimer(Gather)
		drain:
			for len(batch) < cap(batch) {
				select {
				case id := <-s.queue:
					batch = append(batch, id)
				case <-gather.C:
					break drain
				case <-ctx.Done():
					gather.Stop()
					return
				}
			}
			gather.Stop()
			began := time.Now()
			if err := s.SignAll(ctx, batch); err != nil && ctx.Err() == nil {
				s.log.Error("signing receipts failed; the sweep tries again", "err", err)
				s.missed.Store(true)
			}
			if !s.yield(ctx, time.Since(began)) {
				return
			}
			if len(s.queue) == 0 && s.missed.Swap(false) {
				s.Repair(ctx) // calls ended while the queue was full
			}
		case <-t.C:
			if s.audit == nil {
				if k, err := s.newestOwn(ctx); err == nil && k.priv != nil {
					s.setKey(k) // another instance rotated
				}
			}
			// The calls made lately, every sweep; every call, when a
			// notice was dropped and every FullSweep (another instance that
			// stopped before signing what it ended).
			sweeps++
			if s.missed.Swap(false) || sweeps%(int(FullSweep/Sweep)) == 0 {
				s.Repair(ctx)
			} else {
				s.repairSince(ctx, time.Now().Add(-2*Sweep))
			}
		}
	}
}

// Share is the most of one core the signer takes while calls keep ending
// (a busy gate): after a batch that took t, with more calls waiting to be
// signed, it pauses t×(1/Share−1). With none waiting it goes on at once, so
// a quiet gate signs at full speed and a saturated one gives the signer a
// tenth of a core: receipts then lag the calls (a receipt asked for is
// signed at once), and catch up when the peak passes.
const Share = 0.1

// yield pauses after work that took took when more is waiting; false when
// ctx ended.
func (s *Signer) yield(ctx context.Context, took time.Duration) bool {
	if len(s.queue) == 0 {
		return true
	}
	pause := min(time.Duration(float64(took)*(1/Share-1)), time.Second)
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Repair signs the receipt of every final call that has none, and says how
// many it signed.
func (s *Signer) Repair(ctx context.Context) int {
	return s.repairSince(ctx, time.Time{})
}

func (s *Signer) repairSince(ctx context.Context, since time.Time) int {
	n := 0
	for {
		ids, err := s.store.CallsWithoutReceipt(ctx, since, 500)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("looking for calls without a receipt failed", "err", err)
			}
			return n
		}
		if len(ids) == 0 {
			return n
		}
		began := time.Now()
		if err := s.SignAll(ctx, ids); err != nil {
			if ctx.Err() == nil {
				s.log.Error("signing receipts failed", "err", err)
			}
			return n
		}
		n += len(ids)
		if !s.yield(ctx, time.Since(began)) {
			return n
		}
		if len(ids) < 500 {
			return n
		}
	}
}

// SignAll signs and stores the receipts of these calls (those that are
// final and have none yet), reading their records a batch at a time and
// writing the receipts in one write.
func (s *Signer) SignAll(ctx context.Context, ids []string) error {
	have, err := s.store.HaveReceipts(ctx, ids)
	if err != nil {
		return err
	}
	todo := ids[:0:0]
	for _, id := range ids {
		if !have[id] { // signed already (asked for, or by another instance)
			todo = append(todo, id)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	calls, events, approvals, err := s.store.ReceiptRecords(ctx, todo)
	if err != nil {
		return err
	}
	k := s.signing()
	now := time.Now()
	out := make([]models.Receipt, 0, len(calls))
	for i := range calls {
		c := &calls[i]
		if !c.Status.Final() {
			continue
		}
		r, err := s.signRecords(ctx, c, events[c.ID], approvals[c.ID], k, now)
		if err != nil {
			s.log.Error("a receipt could not be signed", "call_id", c.ID, "err", err)
			continue
		}
		out = append(out, r)
	}
	return s.store.SaveReceipts(ctx, out)
}

// signRecords makes one receipt from a call's records.
func (s *Signer) signRecords(ctx context.Context, c *models.ToolCall, events []models.AuditEvent, approvals []models.Approval, k signingKey, now time.Time) (models.Receipt, error) {
	if len(events) == 0 {
		return models.Receipt{}, fmt.Errorf("call %s has no audit events", c.ID)
	}
	run, err := s.run(ctx, c.RunID)
	if err != nil {
		return models.Receipt{}, fmt.Errorf("the run of %s: %w", c.ID, err)
	}
	p, err := Build(c, run, approvals, events, now)
	if err != nil {
		return models.Receipt{}, err
	}
	jws, err := Sign(p, k.id, k.priv)
	if err != nil {
		return models.Receipt{}, err
	}
	return models.Receipt{CallID: c.ID, KeyID: k.id, JWS: jws}, nil
}

// For is the call's receipt: the one kept, or, for a final call without
// one yet, signed and kept now.
func (s *Signer) For(ctx context.Context, callID string) (*models.Receipt, error) {
	if r, err := s.store.Receipt(ctx, callID); err == nil || !errors.Is(err, models.ErrNotFound) {
		return r, err
	}
	return s.keep(ctx, callID, nil)
}

// keep signs a call's receipt and keeps it, or takes the one kept before.
func (s *Signer) keep(ctx context.Context, callID string, known *models.ToolCall) (*models.Receipt, error) {
	r, err := s.sign(ctx, callID, known)
	if err != nil {
		return nil, err
	}
	return s.store.KeepReceipt(ctx, r)
}

// sign makes a call's receipt (not stored); known, when set, is the call
// as just read.
func (s *Signer) sign(ctx context.Context, callID string, known *models.ToolCall) (models.Receipt, error) {
	p, err := s.payload(ctx, callID, known)
	if err != nil {
		return models.Receipt{}, err
	}
	k := s.signing()
	jws, err := Sign(p, k.id, k.priv)
	if err != nil {
		return models.Receipt{}, err
	}
	return models.Receipt{CallID: callID, KeyID: k.id, JWS: jws}, nil
}
