package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
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
		fmt.Fprintf(stdout, "the copy's audit chain is BROKEN at sequence %s: %s\n", seqName(rep.BadChain, rep.BadSeq), rep.Problem)
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
