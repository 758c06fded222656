package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/countersign/countersign/agent/audit"
)

// Anchoring the audit chain outside the database: signed checkpoints of its
// head, written by serve (at start, periodically, at shutdown) and by
// `audit checkpoint`, checked by `audit verify --checkpoints`.

func (cfg *config) anchorFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.AuditKey, "audit-key", "", "Ed25519 key (PEM file, or the PEM itself) that signs audit checkpoints; keep it outside the database")
	fs.StringVar(&cfg.Checkpoints, "checkpoints", "", "directory that receives signed checkpoints of the audit chain (put it where the database's admins cannot rewrite it)")
}

// loadAnchor reads the signing key when checkpoints are asked for.
func loadAnchor(cfg config) (ed25519.PrivateKey, error) {
	if cfg.AuditKey == "" && cfg.Checkpoints == "" {
		return nil, nil
	}
	if cfg.AuditKey == "" || cfg.Checkpoints == "" {
		return nil, errors.New("audit checkpoints need both --audit-key and --checkpoints")
	}
	return audit.LoadPrivateKey(cfg.AuditKey)
}

// cmdAuditKeygen makes a signing key for checkpoints.
func cmdAuditKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "file for the private key (its public key goes to FILE.pub)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError("audit keygen needs --out FILE")
	}
	priv, pub, err := audit.GenerateKey()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write the key (an existing one is never overwritten): %w", err)
	}
	if _, err := f.Write(priv); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(*out+".pub", pub, 0o644); err != nil {
		return err
	}
	key, err := audit.LoadPublicKey(*out + ".pub")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "audit signing key %s written to %s (keep it off the database's machine if you can), public key to %s.pub\n",
		audit.KeyID(key), *out, *out)
	return nil
}

// cmdAuditCheckpoint writes a checkpoint of the chain as it is now.
func cmdAuditCheckpoint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("audit checkpoint", stderr)
	cfg.anchorFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.AuditKey == "" || cfg.Checkpoints == "" {
		return usageError("audit checkpoint needs --audit-key and --checkpoints")
	}
	key, err := loadAnchor(*cfg)
	if err != nil {
		return err
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	file, c, err := audit.Take(ctx, store, key, cfg.Checkpoints, time.Now())
	switch {
	case err != nil:
		return err
	case c.Events() == 0:
		fmt.Fprintln(stdout, "the audit chain is empty: nothing to checkpoint")
	case file == "":
		fmt.Fprintf(stdout, "the newest checkpoint already names %s\n", c.What())
	default:
		fmt.Fprintf(stdout, "checkpoint of %s written to %s\n", c.What(), file)
	}
	return nil
}
