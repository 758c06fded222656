package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-jose/go-jose/v4"

	"github.com/countersign/countersign/agent/receipts"
)

// cmdEvidenceVerify checks an evidence bundle with no database and no
// network: exit 1 naming each failure.
func cmdEvidenceVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("evidence verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keysFile := fs.String("keys", "", "a JWK Set to check the receipt with instead of the bundle's own keys (GET /api/v1/receipts/keys, saved when you trusted it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("evidence verify takes one FILE (GET /api/v1/calls/:id/evidence)")
	}
	raw, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	var b receipts.Bundle
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || b.Version != receipts.BundleVersion {
		return exitError{code: 1, msg: fmt.Sprintf("%s is not an evidence bundle this version reads (%v)", fs.Arg(0), err)}
	}
	var pinned *jose.JSONWebKeySet
	if *keysFile != "" {
		kb, err := os.ReadFile(*keysFile)
		if err != nil {
			return err
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(kb, &set); err != nil {
			return exitError{code: 1, msg: fmt.Sprintf("%s is not a JWK Set: %v", *keysFile, err)}
		}
		pinned = &set
	}
	p, problems := receipts.Check(&b, pinned)
	if len(problems) > 0 {
		for _, pr := range problems {
			fmt.Fprintln(stdout, "FAILED: "+pr)
		}
		return exitError{code: 1, msg: fmt.Sprintf("the evidence of call %s does not hold (%d problems)", b.Call, len(problems))}
	}
	anchor := "the chain's head when the bundle was made (no checkpoint vouched for it yet)"
	if b.Checkpoint != nil {
		anchor = fmt.Sprintf("checkpoint of event %d signed %s", b.Checkpoint.Seq, b.Checkpoint.At.UTC().Format("2006-01-02 15:04:05Z"))
	}
	fmt.Fprintf(stdout, "evidence OK: call %s (%s), %s, %d approvals, %d audit events linked to %s\n",
		p.Call, p.Envelope.Tool, p.Status, len(p.Envelope.Approvals), len(b.Links), anchor)
	return nil
}

// cmdReceiptsRotate makes a new receipt signing key for the deployment.
func cmdReceiptsRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("receipts rotate-key", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	had, err := store.ReceiptKeys(ctx)
	if err != nil {
		return err
	}
	s, err := receipts.New(ctx, store, nil, nil) // makes the first key when there is none
	if err != nil {
		return err
	}
	id := ""
	if len(had) == 0 {
		keys, err := store.ReceiptKeys(ctx)
		if err != nil || len(keys) == 0 {
			return fmt.Errorf("the first receipt key: %v", err)
		}
		id = keys[len(keys)-1].ID
	} else if id, err = s.Rotate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "receipts are signed with key %s from now on (running instances take it within %s); the old keys stay published\n", id, receipts.Sweep)
	return nil
}
