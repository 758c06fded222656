package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/models/fault"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// cmdPolicyReplay decides again, with a candidate policy file, the calls
// recorded since a time, and says how many decisions would change, from
// what to what, with examples. Nothing is changed.
func cmdPolicyReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("policy replay", stderr)
	cfg.toolsFlags(fs)
	since := fs.Duration("since", 720*time.Hour, "replay the calls recorded this long ago and since")
	asJSON := fs.Bool("json", false, "print the report as JSON (changes by tool and rule, with examples)")
	if err := parse(fs, fileLast(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("policy replay takes the candidate policy file")
	}
	cfg.Policy = fs.Arg(0)
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	src := sources(*cfg, store)
	registry, _, set, err := src.Tools()
	if err != nil {
		return err
	}
	defer set.Close()
	candidate, err := src.Policy(registry)
	if err != nil {
		return err
	}
	from := time.Now().Add(-*since).UTC()
	rep, err := gate.ReplayPolicy(ctx, store, registry, candidate, from)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Policy  string `json:"policy"`
			Version string `json:"version"`
			gate.Replay
		}{candidate.Source, candidate.Version(), rep})
	}
	printReplay(stdout, rep, candidate)
	return nil
}

// printReplay is the replay's report for a person: how many decisions would
// change, then each change by tool and rule, with what its examples asked.
func printReplay(w io.Writer, rep gate.Replay, candidate *policy.FilePolicy) {
	fmt.Fprintf(w, "replayed %d decided calls since %s with %s (version %s)\n", rep.Calls, rep.Since.Format(time.RFC3339), candidate.Source, candidate.Version()[:12])
	changed := rep.Calls - rep.Unchanged - rep.Failed
	fmt.Fprintf(w, "  %d unchanged, %d would change", rep.Unchanged, changed)
	if rep.Failed > 0 {
		fmt.Fprintf(w, ", %d could not be decided (first: %s)", rep.Failed, rep.FirstFail)
	}
	fmt.Fprintln(w)
	for _, ch := range rep.Changes {
		fmt.Fprintf(w, "  %6d  %s: %s -> %s\n", ch.Count, ch.Tool, ruled(ch.From, ch.FromRule), ruled(ch.To, ch.ToRule))
		for _, ex := range ch.Examples {
			fmt.Fprintf(w, "          e.g. %s  %s\n", ex.ID, ex.Summary)
		}
	}
	fmt.Fprintln(w, "Facts are taken as they stood before each call (totals, the run's calls), counting calls by their status now;")
	fmt.Fprintln(w, "business facts from your own systems (the demo's customer.refunded_24h) are not replayed: rules reading them see none.")
}

// ruled is a decision with the rule that made it.
func ruled(decision, rule string) string {
	if rule == "" {
		return decision
	}
	return decision + " by " + rule
}

// fileLast lets a command's file come before its flags (policy test FILE
// --demo): the flag package stops at the first argument that is not a flag.
func fileLast(args []string) []string {
	if len(args) > 1 && !strings.HasPrefix(args[0], "-") {
		return append(slices.Clone(args[1:]), args[0])
	}
	return args
}

// cmdPolicyTest runs a policy file's own tests against the real tools.
func cmdPolicyTest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := bareFlagSet("policy test", stderr)
	cfg.policyFlag(fs)
	if err := parse(fs, fileLast(args)); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError("policy test takes at most one file")
	}
	if fs.NArg() == 1 {
		cfg.Policy = fs.Arg(0)
	}
	// The tools only need a store to run, not to be described.
	src := sources(*cfg, nil)
	registry, _, set, err := src.Tools()
	if err != nil {
		fmt.Fprintln(stdout, err)
		return exitError{code: 1}
	}
	defer set.Close()
	for _, u := range set.Upstreams() {
		if !u.Connected {
			fmt.Fprintf(stdout, "warning: the MCP server %s is not answering (%s): its tools are missing\n", u.Name, u.Error)
		}
	}
	pol, err := src.Policy(registry)
	if err != nil {
		fmt.Fprintln(stdout, err)
		return exitError{code: 1}
	}
	results := pol.RunTests(ctx)
	failed := policy.Failing(results)
	for _, r := range results {
		if r.Passed {
			fmt.Fprintf(stdout, "ok    %s\n", r.Name)
		} else {
			fmt.Fprintf(stdout, "FAIL  %s\n      %s\n", r.Name, r.Problem)
		}
	}
	fmt.Fprintf(stdout, "\npolicy %s (version %s): %d passed, %d failed\n", pol.Source, pol.Version()[:12], len(results)-len(failed), len(failed))
	if len(results) == 0 {
		fmt.Fprintln(stdout, "warning: the policy carries no tests")
	}
	if len(failed) > 0 {
		return exitError{code: 1}
	}
	return nil
}

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
		fmt.Fprintf(stdout, "audit chain BROKEN at sequence %d: %s\n", rep.BadSeq, rep.Problem)
		printProblems(stdout, rep.Breaks[1:], rep.MoreBreaks)
	} else {
		fmt.Fprintf(stdout, "audit chain intact: %s\n", plural(int(rep.Events), "event"))
	}
	if pub != nil {
		bad, err := printAnchors(ctx, stdout, store, cfg.Checkpoints, pub, rep.Events)
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
func printAnchors(ctx context.Context, stdout io.Writer, store *storage.Store, dir string, pub ed25519.PublicKey, events int64) (failed bool, err error) {
	anchors, err := audit.VerifyAnchors(ctx, store, dir, pub, events)
	if err != nil {
		return false, err
	}
	switch {
	case !anchors.OK && anchors.BadSeq > 0:
		failed = true
		fmt.Fprintf(stdout, "audit chain BROKEN at sequence %d: %s\n", anchors.BadSeq, anchors.Problem)
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
		fmt.Fprintf(stdout, "audit chain holds %s (the newest: event %d, taken %s)\n",
			held, anchors.Latest.Seq, anchors.Latest.At.Format(time.RFC3339))
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

// openExisting opens a database that must already be there: verifying,
// backing up or issuing a token against a mistyped path must not create an
// empty database and report on that. (Only `user add` and `serve` create
// one.)
func openExisting(path string) (*storage.Store, error) {
	if storage.IsPostgres(path) {
		return storage.Open(path, storage.Options{})
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s (give its path with --db)", path)
		}
		return nil, err
	}
	return storage.Open(path, storage.Options{})
}

// cmdBackup writes a consistent copy of the database while the server may be
// running, then opens the copy and verifies its audit chain.
func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("backup", stderr)
	to := fs.String("to", "", "the new file to write the copy to")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return usageError("backup needs --to FILE")
	}
	if storage.IsPostgres(cfg.DB) {
		return errors.New("backup copies a SQLite file; on PostgreSQL use pg_dump (see docs/how-to/postgresql.md, \"Backups\")")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	start := time.Now()
	if err := store.Backup(ctx, *to); err != nil {
		return err
	}
	took := time.Since(start).Round(time.Millisecond)
	backup, err := storage.Open(*to, storage.Options{})
	if err != nil {
		return fmt.Errorf("the backup at %s does not open: %w", *to, err)
	}
	defer backup.Close()
	rep, err := backup.VerifyAuditChain(ctx)
	if err != nil {
		return fmt.Errorf("check the backup at %s: %w", *to, err)
	}
	size := int64(0)
	if fi, err := os.Stat(*to); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%.1f MB) in %s\n", cfg.DB, *to, float64(size)/1e6, took)
	if !rep.OK {
		fmt.Fprintf(stdout, "the copy's audit chain is BROKEN at sequence %d: %s\n", rep.BadSeq, rep.Problem)
		return exitError{code: 1}
	}
	fmt.Fprintf(stdout, "the copy's audit chain is intact: %s\n", plural(int(rep.Events), "event"))
	return nil
}

// cmdTokenRevoke ends a staff API token read from stdin (so it never sits in
// the shell history or the process list).
func cmdTokenRevoke(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("token revoke", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	line, err := readLine(stdin)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	token := strings.TrimSpace(line)
	if token == "" {
		return usageError("token revoke reads the token from stdin")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	email, err := accounts.New(store).RevokeAPIToken(ctx, token, models.Actor{ID: "cli", Name: "command line"})
	if err != nil {
		return errors.New(fault.Message(err))
	}
	fmt.Fprintf(stdout, "revoked a staff API token of %s\n", email)
	return nil
}

// cmdUserAdd creates a staff account; the password is read from stdin so it
// never appears in the shell history or the process list.
func cmdUserAdd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("user add", stderr)
	email := fs.String("email", "", "the account's email (its sign-in name)")
	role := fs.String("role", "", "approver, supervisor, auditor or admin")
	name := fs.String("name", "", "the name shown in the back office and the audit log")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *email == "" || *role == "" {
		return usageError("user add needs --email and --role")
	}
	line, err := readLine(stdin)
	if err != nil && line == "" {
		return fmt.Errorf("read the password from stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	store, err := storage.Open(cfg.DB, storage.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	st, err := accounts.New(store).AddStaff(ctx, *email, *name, models.StaffRole(*role), password, accounts.HostActor)
	if err != nil {
		return errors.New(fault.Message(err))
	}
	fmt.Fprintf(stdout, "created %s (%s) with the %s role, marked as made on the host; every admin is told\n", st.Email, st.Name, st.Role)
	return nil
}

// cmdUserEnrollLink prints a one-time enrollment link for an account: the
// way a new account, or a reset one, reaches its owner when the deployment
// sends no email. Whoever runs it holds the database anyway; it is audited
// as done on the host, and the account's earlier links stop working.
func cmdUserEnrollLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("user enroll-link", stderr)
	email := fs.String("email", "", "the account whose owner sets a password")
	public := fs.String("public-url", "http://127.0.0.1:8080", "the address people open Countersign at")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *email == "" {
		return usageError("user enroll-link needs --email")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	path, expires, err := accounts.New(store).EnrollLink(ctx, *email)
	if err != nil {
		return errors.New(fault.Message(err))
	}
	fmt.Fprintf(stdout, "%s%s\n", strings.TrimRight(*public, "/"), path)
	fmt.Fprintf(stderr, "works once, until %s; give it to %s alone\n", expires.UTC().Format("2006-01-02 15:04 UTC"), *email)
	return nil
}

// cmdTokenCreate prints a new staff API token on stdout, and nothing else.
func cmdTokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("token create", stderr)
	email := fs.String("email", "", "the account the token acts as")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *email == "" {
		return usageError("token create needs --email")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	token, err := accounts.New(store).CreateAPIToken(ctx, *email, models.Actor{ID: "cli", Name: "command line"})
	if err != nil {
		return errors.New(fault.Message(err))
	}
	fmt.Fprintln(stdout, token)
	return nil
}

// readLine reads one line from r and nothing past it, so that a script
// whose standard input holds one answer per command gives each its own
// (a buffered reader would take the next command's line too).
func readLine(r io.Reader) (string, error) {
	var b strings.Builder
	var c [1]byte
	for b.Len() < 4096 {
		n, err := r.Read(c[:])
		if n == 1 {
			b.WriteByte(c[0])
			if c[0] == '\n' {
				return b.String(), nil
			}
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), nil
}
