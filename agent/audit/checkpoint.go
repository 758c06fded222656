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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/models/storage"
)

// Checkpoint is a signed statement of the chain's head at a moment: the
// number of its last event and that event's hash. Whoever holds the
// checkpoints can tell when the chain was later cut short, rewound or
// rewritten, even by someone who controls the whole database, as long as
// they do not also hold the signing key.
type Checkpoint struct {
	Version   int       `json:"version"`
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	At        time.Time `json:"at"`
	KeyID     string    `json:"key_id"`
	Signature string    `json:"signature"`
	// File is where it was read from (not stored).
	File string `json:"-"`
}

func (c Checkpoint) message() []byte {
	return []byte("countersign audit checkpoint v1\nseq=" + strconv.FormatInt(c.Seq, 10) + "\nhash=" + c.Hash +
		"\nat=" + c.At.UTC().Format(time.RFC3339Nano) + "\n")
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

// Valid checks the checkpoint's signature.
func (c Checkpoint) Valid(pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	return err == nil && c.Version == 1 && c.KeyID == KeyID(pub) && ed25519.Verify(pub, c.message(), sig)
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
	name := filepath.Join(dir, fmt.Sprintf("checkpoint-%012d-%s.json", c.Seq, c.At.UTC().Format("20060102T150405.000000Z")))
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

// Take signs the store's current head and writes it to dir; it writes
// nothing for an empty chain, or when the newest checkpoint there already
// names this head (written is then "").
func Take(ctx context.Context, store *storage.Store, key ed25519.PrivateKey, dir string, now time.Time) (written string, c Checkpoint, err error) {
	seq, hash, err := store.AuditHeadNow(ctx)
	if err != nil || seq == 0 {
		return "", c, err
	}
	if latest, err := latestIn(dir); err == nil && latest.Seq == seq && latest.Hash == hash {
		return "", latest, nil
	}
	c = Sign(key, seq, hash, now)
	written, err = Write(dir, c)
	return written, c, err
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

// AnchorReport says whether the chain holds every checkpoint.
type AnchorReport struct {
	OK          bool
	Checkpoints int
	Latest      *Checkpoint
	// BadSeq and Problem name the first checkpoint the chain does not hold.
	BadSeq  int64
	Problem string
}

// VerifyAnchors checks every checkpoint in dir: each must be signed by pub,
// and the chain (already verified link by link, chainEvents long) must
// still hold the event it names, with the same hash. A chain cut short,
// rewound, emptied or rewritten and re-hashed since a checkpoint fails here.
func VerifyAnchors(ctx context.Context, store *storage.Store, dir string, pub ed25519.PublicKey, chainEvents int64) (AnchorReport, error) {
	var rep AnchorReport
	names, err := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if err != nil {
		return rep, err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return rep, fmt.Errorf("no checkpoint directory at %s", dir)
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
		if c.Seq > chainEvents {
			rep.BadSeq = chainEvents + 1
			rep.Problem = fmt.Sprintf("the chain has %d events but checkpoint %s (taken %s) saw %d: events were removed or the chain was rewound",
				chainEvents, c.File, c.At.Format(time.RFC3339), c.Seq)
			return rep, nil
		}
		e, err := store.AuditEventAt(ctx, c.Seq)
		if err != nil {
			return rep, err
		}
		if e.Hash != c.Hash {
			rep.BadSeq = c.Seq
			rep.Problem = fmt.Sprintf("event %d is not the one checkpoint %s (taken %s) signed: the chain was rewritten", c.Seq, c.File, c.At.Format(time.RFC3339))
			return rep, nil
		}
		rep.Checkpoints++
		cp := c
		rep.Latest = &cp
	}
	rep.OK = true
	return rep, nil
}

// FirstAtOrAfter is the earliest checkpoint in dir that names event seq or
// a later one: the nearest signed statement that vouches for it (nil when
// none does yet).
func FirstAtOrAfter(dir string, seq int64) (*Checkpoint, error) {
	if dir == "" {
		return nil, nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "checkpoint-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names) // by sequence: the names carry it zero-padded
	for _, name := range names {
		c, err := readCheckpoint(name)
		if err != nil {
			return nil, err
		}
		if c.Seq >= seq {
			return &c, nil
		}
	}
	return nil, nil
}
