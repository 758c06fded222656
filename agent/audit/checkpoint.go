package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Checkpoint is a signed statement of the chains' heads at a moment.
// Version 1 names chain 0's head alone, the number of its last event and
// that event's hash (what a database with one chain writes, as before
// chains); version 2, an anchor (anchor.go), names every chain's head by
// the Merkle root over them. Whoever holds the checkpoints can tell when a
// chain was later cut short, rewound, rewritten or removed, even by
// someone who controls the whole database, as long as they do not also
// hold the signing key.
type Checkpoint struct {
	Version int    `json:"version"`
	Seq     int64  `json:"seq,omitempty"`  // version 1
	Hash    string `json:"hash,omitempty"` // version 1
	// Heads are every chain's head, in chain order, and Root the Merkle
	// root over them (version 2). An evidence bundle carries the root
	// alone, with an Inclusion for its chain.
	Heads     []models.ChainHead `json:"heads,omitempty"`
	Root      string             `json:"root,omitempty"`
	At        time.Time          `json:"at"`
	KeyID     string             `json:"key_id"`
	Signature string             `json:"signature"`
	// File is where it was read from (not stored).
	File string `json:"-"`
}

func (c Checkpoint) message() []byte {
	if c.Version == 2 {
		return []byte("countersign audit anchor v2\nroot=" + c.Root + "\nat=" + c.At.UTC().Format(time.RFC3339Nano) + "\n")
	}
	return []byte("countersign audit checkpoint v1\nseq=" + strconv.FormatInt(c.Seq, 10) + "\nhash=" + c.Hash +
		"\nat=" + c.At.UTC().Format(time.RFC3339Nano) + "\n")
}

// Events is how many events the checkpoint vouches for, in all chains: it
// only grows from one checkpoint to the next, and orders their files.
func (c Checkpoint) Events() int64 {
	if c.Version != 2 {
		return c.Seq
	}
	var n int64
	for _, h := range c.Heads {
		n += h.Seq
	}
	return n
}

// HeadOf is the head the checkpoint names for a chain (false: none).
func (c Checkpoint) HeadOf(chain int64) (models.ChainHead, bool) {
	if c.Version != 2 {
		return models.ChainHead{Seq: c.Seq, Hash: c.Hash}, chain == 0
	}
	for _, h := range c.Heads {
		if h.Chain == chain {
			return h, true
		}
	}
	return models.ChainHead{}, false
}

// What says what the checkpoint names: "event 12" (version 1), or "12
// events in 2 chains".
func (c Checkpoint) What() string {
	if c.Version != 2 {
		return fmt.Sprintf("event %d", c.Seq)
	}
	return fmt.Sprintf("%d events in %d chains", c.Events(), len(c.Heads))
}

// Name is how people are told which checkpoint: its file and time.
func (c Checkpoint) Name() string {
	return fmt.Sprintf("%s (taken %s)", c.File, c.At.Format(time.RFC3339))
}

// KeyID names a public key: the start of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateKey makes a signing key and returns it and its public half as PEM.
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// pemFrom reads PEM from a file, or takes the value itself when it is PEM
// (a key given in an environment variable).
func pemFrom(fileOrPEM string) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(fileOrPEM), "-----BEGIN") {
		return []byte(fileOrPEM), nil
	}
	b, err := os.ReadFile(fileOrPEM)
	if err != nil {
		return nil, fmt.Errorf("read the key: %w", err)
	}
	return b, nil
}

// LoadPrivateKey reads an Ed25519 private key (PKCS #8 PEM) from a file or
// from the PEM text itself.
func LoadPrivateKey(fileOrPEM string) (ed25519.PrivateKey, error) {
	b, err := pemFrom(fileOrPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("the audit key is not a PEM private key (make one with `countersign audit keygen`)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the audit key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("the audit key is not an Ed25519 key")
	}
	return priv, nil
}

// LoadPublicKey reads an Ed25519 public key (PKIX PEM), or the public half
// of a private key file.
func LoadPublicKey(fileOrPEM string) (ed25519.PublicKey, error) {
	b, err := pemFrom(fileOrPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block != nil && block.Type == "PRIVATE KEY" {
		priv, err := LoadPrivateKey(string(b))
		if err != nil {
			return nil, err
		}
		return priv.Public().(ed25519.PublicKey), nil
	}
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("the public key is not a PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("the public key is not an Ed25519 key")
	}
	return pub, nil
}

// Sign makes a checkpoint of a head.
func Sign(key ed25519.PrivateKey, seq int64, hash string, at time.Time) Checkpoint {
	c := Checkpoint{Version: 1, Seq: seq, Hash: hash, At: at.UTC().Truncate(time.Microsecond),
		KeyID: KeyID(key.Public().(ed25519.PublicKey))}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.message()))
	return c
}

// SignHeads makes a checkpoint of the chains' heads: version 1 when chain
// 0 is the only one, else an anchor over all of them.
func SignHeads(key ed25519.PrivateKey, heads []models.ChainHead, at time.Time) (Checkpoint, error) {
	if len(heads) == 1 && heads[0].Chain == 0 {
		return Sign(key, heads[0].Seq, heads[0].Hash, at), nil
	}
	root, err := MerkleRoot(heads)
	if err != nil {
		return Checkpoint{}, err
	}
	c := Checkpoint{Version: 2, Heads: heads, Root: root, At: at.UTC().Truncate(time.Microsecond),
		KeyID: KeyID(key.Public().(ed25519.PublicKey))}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.message()))
	return c, nil
}

// Valid checks the checkpoint's signature, and an anchor's heads against
// the root it signed (a bundle's anchor carries none).
func (c Checkpoint) Valid(pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || (c.Version != 1 && c.Version != 2) || c.KeyID != KeyID(pub) || !ed25519.Verify(pub, c.message(), sig) {
		return false
	}
	if c.Version == 2 && len(c.Heads) > 0 {
		root, err := MerkleRoot(c.Heads)
		return err == nil && root == c.Root
	}
	return true
}

// Write stores the checkpoint in dir under a name that sorts by sequence,
// under a temporary name renamed into place, so a reader never sees half.
func Write(dir string, c Checkpoint) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	name := filepath.Join(dir, fmt.Sprintf("checkpoint-%012d-%s.json", c.Events(), c.At.UTC().Format("20060102T150405.000000Z")))
	tmp, err := os.CreateTemp(dir, ".checkpoint-*")
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	return name, nil
}

// Take signs the store's current heads and writes them to dir; it writes
// nothing for an empty log, or when the newest checkpoint there already
// names these heads (written is then "").
func Take(ctx context.Context, store *storage.Store, key ed25519.PrivateKey, dir string, now time.Time) (written string, c Checkpoint, err error) {
	heads, err := store.AuditHeadsNow(ctx)
	if err != nil || len(heads) == 0 {
		return "", c, err
	}
	if latest, err := latestIn(dir); err == nil && sameHeads(latest, heads) {
		return "", latest, nil
	}
	if c, err = SignHeads(key, heads, now); err != nil {
		return "", c, err
	}
	written, err = Write(dir, c)
	return written, c, err
}

// sameHeads says whether a checkpoint names exactly these heads.
func sameHeads(c Checkpoint, heads []models.ChainHead) bool {
	if c.Version != 2 {
		return len(heads) == 1 && heads[0] == models.ChainHead{Seq: c.Seq, Hash: c.Hash}
	}
	return slices.Equal(c.Heads, heads)
}

func latestIn(dir string) (Checkpoint, error) {
	names, err := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if err != nil || len(names) == 0 {
		return Checkpoint{}, errors.New("none")
	}
	sort.Strings(names)
	return readCheckpoint(names[len(names)-1])
}

func readCheckpoint(name string) (Checkpoint, error) {
	var c Checkpoint
	b, err := os.ReadFile(name)
	if err != nil {
		return c, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s is not a checkpoint: %w", filepath.Base(name), err)
	}
	c.File = filepath.Base(name)
	return c, nil
}

// AnchorReport says whether the chains hold every checkpoint.
type AnchorReport struct {
	OK          bool
	Checkpoints int
	Latest      *Checkpoint
	// BadChain, BadSeq and Problem name the first checkpoint the chains
	// do not hold.
	BadChain int64
	BadSeq   int64
	Problem  string
}

// VerifyAnchors checks every checkpoint in dir: each must be signed by pub,
// and every chain it names (already verified link by link, ending at
// walked) must still hold the event it names, with the same hash. A chain
// cut short, rewound, emptied, removed or rewritten and re-hashed since a
// checkpoint fails here.
func VerifyAnchors(ctx context.Context, store *storage.Store, dir string, pub ed25519.PublicKey, walked []models.ChainHead) (AnchorReport, error) {
	var rep AnchorReport
	names, err := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if err != nil {
		return rep, err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return rep, fmt.Errorf("no checkpoint directory at %s", dir)
	}
	ends := map[int64]int64{}
	for _, h := range walked {
		ends[h.Chain] = h.Seq
	}
	sort.Strings(names)
	for _, name := range names {
		c, err := readCheckpoint(name)
		if err != nil {
			rep.Problem = err.Error()
			return rep, nil
		}
		if !c.Valid(pub) {
			rep.Problem = fmt.Sprintf("checkpoint %s is not signed by this key: it cannot be trusted", c.File)
			return rep, nil
		}
		heads := c.Heads
		if c.Version != 2 {
			heads = []models.ChainHead{{Seq: c.Seq, Hash: c.Hash}}
		}
		for _, h := range heads {
			if ok, err := holds(ctx, store, c, h, ends[h.Chain], &rep); err != nil || !ok {
				return rep, err
			}
		}
		rep.Checkpoints++
		cp := c
		rep.Latest = &cp
	}
	rep.OK = true
	return rep, nil
}

// holds says whether a chain, walked to end, still holds head as
// checkpoint c signed it; when not, it says why in rep.
func holds(ctx context.Context, store *storage.Store, c Checkpoint, h models.ChainHead, end int64, rep *AnchorReport) (bool, error) {
	if h.Seq > end {
		rep.BadChain, rep.BadSeq = h.Chain, end+1
		rep.Problem = models.OnChain(h.Chain, fmt.Sprintf("the chain has %d events but checkpoint %s saw %d: events were removed or the chain was rewound",
			end, c.Name(), h.Seq))
		return false, nil
	}
	e, err := store.AuditEventAt(ctx, h.Chain, h.Seq)
	if err != nil {
		return false, err
	}
	if e.Hash != h.Hash {
		rep.BadChain, rep.BadSeq = h.Chain, h.Seq
		rep.Problem = fmt.Sprintf("%s is not the one checkpoint %s signed: the chain was rewritten", models.EventName(h.Chain, h.Seq), c.Name())
		return false, nil
	}
	return true, nil
}

// FirstAtOrAfter is the earliest checkpoint in dir that names event seq of
// chain, or a later one of that chain: the nearest signed statement that
// vouches for it (nil when none does yet).
func FirstAtOrAfter(dir string, chain, seq int64) (*Checkpoint, error) {
	if dir == "" {
		return nil, nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names) // by events: the names carry the count zero-padded
	for _, name := range names {
		c, err := readCheckpoint(name)
		if err != nil {
			return nil, err
		}
		if h, ok := c.HeadOf(chain); ok && h.Seq >= seq {
			return &c, nil
		}
	}
	return nil, nil
}
