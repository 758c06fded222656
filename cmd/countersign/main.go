// Command countersign runs the Countersign server and its admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ex exitError
		if !errors.As(err, &ex) || ex.msg != "" {
			fmt.Fprintln(os.Stderr, "countersign:", err)
		}
		code := 1
		if errors.As(err, &ex) {
			code = ex.code
		}
		os.Exit(code)
	}
}

// exitError ends the program with a code; an empty message prints nothing
// more (the command already said what went wrong).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

const usage = `Countersign runs AI support agents and puts a human countersignature on risky tool calls.

Usage:
  countersign serve [--addr 127.0.0.1:8080] [--db countersign.db] [--policy FILE] [--tools FILE] [--demo]
                    [--model offline|openai|anthropic] [--model-name M] [--model-base-url URL]
                    [--model-api-key KEY] [--model-timeout 60s] [--customer-secret S [--customer-secret-previous S]]
                    [--widget-origins O1,O2] [--mcp-origins O1,O2] [--trust-proxy] [--tls-cert FILE --tls-key FILE]
                    [--demo-page] [--customer-token-max-age 24h] [--customer-token-issuer I] [--customer-token-audience A]
                    [--audit-key FILE --checkpoints DIR [--checkpoint-every 1h]] [--mcp-hold 50s] [--max-args 1048576] [--intent-window 24h]
                    [--system-prompt FILE] [--shadow-policy FILE] [--log-level info]
                    [--policy-from-file] [--policy-people N] [--single-person-shop]
                    agents: [--agent-calls-per-second 20] [--agent-call-burst 100] [--agent-max-waiting 50]
                    [--session-max-waiting 10] [--conversation-max-waiting 3] [--customer-max-waiting 10]
                    operators: [--metrics-addr 127.0.0.1:9464] [--otlp-endpoint http://localhost:4318]
                    reaching people: [--public-url URL] [--webhook URL]... [--webhook-events "E E"] [--webhook-secret S]
                    [--slack-webhook URL] [--slack-token T --slack-channel C] [--slack-signing-secret S]
                    [--slack-api-url URL] [--smtp-url URL --mail-from ADDR] [--escalate-after 15m] [--remind-before 5m]
                    staff sign-in: [--oidc-issuer URL --oidc-client-id ID --oidc-client-secret S --oidc-group GROUP=ROLE...]
                    [--oidc-groups-claim groups] [--oidc-name NAME] [--password-sign-in on|off] [--sign-with-passkey]
  countersign user add --email E --role approver|supervisor|auditor|admin [--name N] [--db ...]   (password on stdin)
                                   the first admins and break-glass: marked "made on the host", every admin is told
  countersign user enroll-link --email E [--public-url URL] [--db ...]
                                   prints a one-time link for that person to set their password (72 hours)
  countersign token create --email E [--db ...]      (prints a new staff API token)
  countersign token revoke [--db ...]                (the token on stdin)
  countersign agent add --name NAME [--calls-per-second N] [--call-burst N] [--max-waiting N] [--db ...]
                                   (prints a new agent key for the gate API)
  countersign agent list [--db ...] | agent revoke NAME [--db ...]
  countersign agent limits NAME [--calls-per-second N] [--call-burst N] [--max-waiting N] [--db ...]
                                   an agent's own limits (also on agent add; 0: the instance's)
  countersign mcp --url URL --agent-key KEY          (MCP over stdio, bridged to a running server's /mcp)
  countersign policy test [FILE | --policy FILE] [--tools FILE] [--demo]
  countersign policy replay FILE [--since 720h] [--tools FILE] [--demo] [--json] [--db ...]
                                   what FILE would have decided about the calls recorded since then
  countersign policy people [N] [--single-person-shop] [--db ...]
                                   how many admins sign a policy change here; N changes it (audited as done on this host)
  countersign audit verify [--db ...] [--checkpoints DIR --audit-public-key FILE]
  countersign audit checkpoint --audit-key FILE --checkpoints DIR [--db ...]
  countersign audit keygen --out FILE                (an Ed25519 key for checkpoints, FILE.pub beside it)
  countersign evidence verify --keys JWKS|--trust-bundle-keys [--require-checkpoint] FILE
                                                    (checks every evidence bundle of FILE offline; exit 1 names each failure)
  countersign receipts rotate-key [--db ...]         (a new key signs receipts; the old ones stay published)
  countersign backup --to FILE [--db ...]            (a consistent copy, safe while serve runs)
  countersign version                                (the release, commit and build of this binary)

Every flag can also be set as COUNTERSIGN_<FLAG> in the environment
(for example COUNTERSIGN_DB=/data/countersign.db). "countersign COMMAND -h"
says what each of a command's flags does.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{code: 2}
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "policy":
		switch {
		case len(args) >= 2 && args[1] == "test":
			return cmdPolicyTest(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "replay":
			return cmdPolicyReplay(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "people":
			return cmdPolicyPeople(ctx, args[2:], stdout, stderr)
		}
		return usageError("policy takes a command: test, replay or people")
	case "user":
		switch {
		case len(args) >= 2 && args[1] == "add":
			return cmdUserAdd(ctx, args[2:], stdin, stdout, stderr)
		case len(args) >= 2 && args[1] == "enroll-link":
			return cmdUserEnrollLink(ctx, args[2:], stdout, stderr)
		}
		return usageError("user takes a command: add or enroll-link")
	case "token":
		switch {
		case len(args) >= 2 && args[1] == "create":
			return cmdTokenCreate(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "revoke":
			return cmdTokenRevoke(ctx, args[2:], stdin, stdout, stderr)
		}
		return usageError("token takes a command: create or revoke")
	case "mcp":
		return cmdMCP(ctx, args[1:], stdin, stdout, stderr)
	case "agent":
		switch {
		case len(args) >= 2 && args[1] == "add":
			return cmdAgentAdd(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "list":
			return cmdAgentList(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "revoke":
			return cmdAgentRevoke(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "limits":
			return cmdAgentLimits(ctx, args[2:], stdout, stderr)
		}
		return usageError("agent takes a command: add, list, limits or revoke")
	case "audit":
		switch {
		case len(args) >= 2 && args[1] == "verify":
			return cmdAuditVerify(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "checkpoint":
			return cmdAuditCheckpoint(ctx, args[2:], stdout, stderr)
		case len(args) >= 2 && args[1] == "keygen":
			return cmdAuditKeygen(ctx, args[2:], stdout, stderr)
		}
		return usageError("audit takes a command: verify, checkpoint or keygen")
	case "evidence":
		if len(args) >= 2 && args[1] == "verify" {
			return cmdEvidenceVerify(ctx, args[2:], stdout, stderr)
		}
		return usageError("evidence takes a command: verify")
	case "receipts":
		if len(args) >= 2 && args[1] == "rotate-key" {
			return cmdReceiptsRotate(ctx, args[2:], stdout, stderr)
		}
		return usageError("receipts takes a command: rotate-key")
	case "backup":
		return cmdBackup(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, versionLine())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError(fmt.Sprintf("unknown command %q", args[0]))
}

func usageError(msg string) error {
	return exitError{code: 2, msg: msg + "\n\n" + usage}
}
