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
	"github.com/countersign/countersign/models"
)

// cmdEvidenceVerify checks evidence bundles with no database and no
// network: a file of one bundle (GET /api/v1/calls/:id/evidence) or of
// several, one per line (the audit page's "Evidence"). Every bundle is
// checked and each failure is named with its line. Exit 0 only when every
// bundle holds against keys the caller chose: pinned with --keys, or the
// bundles' own when --trust-bundle-keys says so (anyone can re-sign a
// receipt with a key of their own and put that key in the bundle).
func cmdEvidenceVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("evidence verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keysFile := fs.String("keys", "", "a JWK Set to check the receipts with instead of the bundles' own keys (GET /api/v1/receipts/keys, saved when you trusted it)")
	trustOwn := fs.Bool("trust-bundle-keys", false, "check the receipts with the keys each bundle carries, knowing that whoever made the file could have made those keys too")
	needCheckpoint := fs.Bool("require-checkpoint", false, "fail a bundle whose chain ends at no signed checkpoint (with one, removing the bundle's tail is caught)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("evidence verify takes one FILE (GET /api/v1/calls/:id/evidence, or the audit page's Evidence: one bundle per line)")
	}
	raw, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	pinned, err := readKeySet(*keysFile)
	if err != nil {
		return err
	}
	bundles, err := readBundles(raw)
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("%s: %v", fs.Arg(0), err)}
	}
	several := len(bundles) > 1
	failed, unanchored := 0, 0
	for _, lb := range bundles {
		where := ""
		if several {
			where = fmt.Sprintf("line %d: ", lb.line)
		}
		p, problems := receipts.Check(&lb.b, pinned)
		if lb.b.Checkpoint == nil {
			unanchored++
			if *needCheckpoint {
				problems = append(problems, "checkpoint: the bundle has none (its chain is unanchored) and --require-checkpoint asks for one")
			}
		}
		if len(problems) > 0 {
			failed++
			for _, pr := range problems {
				fmt.Fprintf(stdout, "FAILED: %scall %s: %s\n", where, lb.b.Call, pr)
			}
			continue
		}
		anchor := "the chain's head when the bundle was made: unanchored, no signed checkpoint vouches for it (--require-checkpoint refuses such a bundle)"
		if cp := lb.b.Checkpoint; cp != nil && lb.b.Inclusion != nil {
			head := lb.b.Inclusion.Head
			anchor = fmt.Sprintf("the anchor of %d chains signed %s, which names %s", lb.b.Inclusion.Size, cp.At.UTC().Format("2006-01-02 15:04:05Z"),
				models.EventName(head.Chain, head.Seq))
		} else if cp != nil {
			anchor = fmt.Sprintf("checkpoint of event %d signed %s", cp.Seq, cp.At.UTC().Format("2006-01-02 15:04:05Z"))
		}
		fmt.Fprintf(stdout, "%sevidence OK: call %s (%s), %s, %s, %s linked to %s\n", where,
			p.Call, p.Envelope.Tool, p.Status, plural(len(p.Envelope.Approvals), "approval"), plural(len(lb.b.Links), "audit event"), anchor)
	}
	if failed > 0 {
		what := fmt.Sprintf("the evidence of call %s does not hold", bundles[0].b.Call)
		if several {
			what = fmt.Sprintf("%d of %d bundles do not hold", failed, len(bundles))
		}
		return exitError{code: 1, msg: what}
	}
	if several {
		fmt.Fprintf(stdout, "%d bundles, every one holds (%d unanchored)\n", len(bundles), unanchored)
	}
	switch {
	case pinned != nil:
		fmt.Fprintf(stdout, "receipts checked with the keys of %s\n", *keysFile)
	case *trustOwn:
		fmt.Fprintln(stdout, "receipts checked with the keys the bundles carry (--trust-bundle-keys): they prove the file is whole, not who made it")
	default:
		return exitError{code: 1, msg: "the receipt keys were not pinned: the receipts verify only with the keys the bundles carry, and whoever altered a bundle could have replaced those too. " +
			"Check with --keys FILE (GET /api/v1/receipts/keys, from the deployment you trust), or say --trust-bundle-keys"}
	}
	return nil
}

// readKeySet reads the JWK Set of --keys; none when file is "".
func readKeySet(file string) (*jose.JSONWebKeySet, error) {
	if file == "" {
		return nil, nil
	}
	kb, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(kb, &set); err != nil || len(set.Keys) == 0 {
		return nil, exitError{code: 1, msg: fmt.Sprintf("%s is not a JWK Set with a key in it (%v)", file, err)}
	}
	return &set, nil
}

// aBundle is one bundle of an evidence file and the line it starts on.
type aBundle struct {
	b    receipts.Bundle
	line int
}

// readBundles reads every JSON value of an evidence file: one bundle
// (pretty-printed or not) or one per line. Anything that is not a bundle
// this version reads is refused with its line.
func readBundles(raw []byte) ([]aBundle, error) {
	var out []aBundle
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		start := dec.InputOffset()
		line := lineAt(raw, start+int64(len(raw[start:])-len(bytes.TrimLeft(raw[start:], " \t\r\n"))))
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("line %d is not JSON: %v", line, err)
		}
		var b receipts.Bundle
		one := json.NewDecoder(bytes.NewReader(v))
		one.DisallowUnknownFields()
		if err := one.Decode(&b); err != nil || (b.Version != receipts.BundleVersion && b.Version != receipts.BundleVersionChained) {
			if err == nil {
				err = fmt.Errorf("version %d", b.Version)
			}
			return nil, fmt.Errorf("line %d is not an evidence bundle this version reads (%v)", line, err)
		}
		out = append(out, aBundle{b, line})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the file holds no evidence bundle")
	}
	return out, nil
}

func lineAt(raw []byte, off int64) int {
	if off > int64(len(raw)) {
		off = int64(len(raw))
	}
	return bytes.Count(raw[:off], []byte("\n")) + 1
}

// plural says n of a noun: "1 approval", "2 approvals".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
