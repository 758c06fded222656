package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// `countersign audit verify`: every chain, the anchors, the signatures and
// the records, each said in full.

// cmdAuditVerify walks the audit chain, checks it against the signed
// checkpoints when given, and checks that the call, approval and outcome
// rows agree with the events that recorded them. Exit 1 names the first
// problem.
func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("audit verify", stderr)
	fs.StringVar(&cfg.Checkpoints, "checkpoints", "", "directory of signed checkpoints the chain must still hold")
	fs.StringVar(&cfg.AuditPublicKey, "audit-public-key", "", "the public key that signed them (PEM file or text; the private key file works too)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var pub ed25519.PublicKey
	if cfg.Checkpoints != "" {
		if cfg.AuditPublicKey == "" {
			return usageError("--checkpoints needs --audit-public-key: checkpoints are only worth the key that checks them")
		}
		var err error
		if pub, err = audit.LoadPublicKey(cfg.AuditPublicKey); err != nil {
			return err
		}
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	rep, err := store.VerifyAuditChain(ctx)
	if err != nil {
		return err
	}
	// Every check runs and says everything it found: one problem must not
	// hide another.
	failed := false
	if !rep.OK {
		failed = true
		fmt.Fprintf(stdout, "audit chain BROKEN at sequence %s: %s\n", seqName(rep.BadChain, rep.BadSeq), rep.Problem)
		printProblems(stdout, rep.Breaks[1:], rep.MoreBreaks)
	} else {
		fmt.Fprintf(stdout, "audit chain intact: %s\n", plural(int(rep.Events), "event"))
	}
	if pub != nil {
		bad, err := printAnchors(ctx, stdout, store, cfg.Checkpoints, pub, rep.Heads)
		if err != nil {
			return err
		}
		failed = failed || bad
	}
	bad, err := printSignatures(ctx, stdout, store)
	if err != nil {
		return err
	}
	failed = failed || bad
	records, err := audit.VerifyRecords(ctx, store)
	if err != nil {
		return err
	}
	if !records.OK {
		fmt.Fprintf(stdout, "records DISAGREE with the audit chain: %d of %s\n", len(records.Disagreements)+records.MoreDisagreements, plural(int(records.Calls), "call"))
		printProblems(stdout, records.Disagreements, records.MoreDisagreements)
		return exitError{code: 1}
	}
	if failed {
		fmt.Fprintf(stdout, "records agree with the audit chain: %s, %s\n", plural(int(records.Calls), "call"), plural(int(records.Approvals), "verdict"))
		return exitError{code: 1}
	}
	fmt.Fprintf(stdout, "records agree with the audit chain: %s, %s\n", plural(int(records.Calls), "call"), plural(int(records.Approvals), "verdict"))
	return nil
}

// printAnchors says whether the chain holds the signed checkpoints in dir;
// true when it does not.
func printAnchors(ctx context.Context, stdout io.Writer, store *storage.Store, dir string, pub ed25519.PublicKey, walked []models.ChainHead) (failed bool, err error) {
	anchors, err := audit.VerifyAnchors(ctx, store, dir, pub, walked)
	if err != nil {
		return false, err
	}
	switch {
	case !anchors.OK && anchors.BadSeq > 0:
		failed = true
		fmt.Fprintf(stdout, "audit chain BROKEN at sequence %s: %s\n", seqName(anchors.BadChain, anchors.BadSeq), anchors.Problem)
	case !anchors.OK:
		failed = true
		fmt.Fprintf(stdout, "audit checkpoints UNUSABLE: %s\n", anchors.Problem)
	case anchors.Checkpoints == 0:
		failed = true
		fmt.Fprintf(stdout, "audit checkpoints MISSING: %s holds none, so nothing outside the database vouches for the chain\n", dir)
	default:
		held := fmt.Sprintf("all %d checkpoints", anchors.Checkpoints)
		if anchors.Checkpoints == 1 {
			held = "its one checkpoint"
		}
		fmt.Fprintf(stdout, "audit chain holds %s (the newest: %s, taken %s)\n",
			held, anchors.Latest.What(), anchors.Latest.At.Format(time.RFC3339))
	}
	return failed, nil
}

// printSignatures says whether the passkey signatures and the receipts
// kept check out; true when one does not.
func printSignatures(ctx context.Context, stdout io.Writer, store *storage.Store) (failed bool, err error) {
	keys, err := audit.VerifyPasskeys(ctx, store)
	if err != nil {
		return false, err
	}
	if len(keys.Failures) > 0 {
		failed = true
		fmt.Fprintf(stdout, "passkey signatures FAIL: %d of %d\n", len(keys.Failures), keys.Signed)
		printProblems(stdout, keys.Failures, 0)
	} else if keys.Signed > 0 {
		fmt.Fprintf(stdout, "passkey signatures check out: %s\n", plural(int(keys.Signed), "verdict"))
	}
	signed, err := receipts.VerifyStored(ctx, store)
	if err != nil {
		return false, err
	}
	switch {
	case len(signed.Failures) > 0:
		failed = true
		fmt.Fprintf(stdout, "receipts FAIL: %d of %d\n", len(signed.Failures)+signed.MoreFailures, signed.Receipts)
		printProblems(stdout, signed.Failures, signed.MoreFailures)
	case signed.Missing > 0:
		verb := "are"
		if signed.Missing == 1 {
			verb = "is"
		}
		fmt.Fprintf(stdout, "receipts check out: %d; %s %s not signed yet (a server signs them when it starts)\n", signed.Receipts, plural(signed.Missing, "final call"), verb)
	case signed.Receipts > 0:
		fmt.Fprintf(stdout, "receipts check out: %d, every final call signed\n", signed.Receipts)
	}
	return failed, nil
}

// printProblems lists problems a verification found, one a line, and how
// many more it found past those.
func printProblems(w io.Writer, problems []string, more int) {
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	if more > 0 {
		fmt.Fprintf(w, "  … and %d more\n", more)
	}
}

// seqName is an event's number as a broken chain is reported: "12", or "12
// of chain 3" past the first chain.
func seqName(chain, seq int64) string {
	return strings.TrimPrefix(models.EventName(chain, seq), "event ")
}
