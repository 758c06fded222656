package main

import (
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"
)

// config is every flag of every subcommand; each subcommand registers the
// ones it uses.
type config struct {
	Addr string
	// LogLevel is the least level logged: debug, info, warn or error.
	LogLevel     string
	DB           string
	Policy       string
	ShadowPolicy string
	// PolicyFromFile lets the --policy file rule: it is put in force at
	// start and on SIGHUP without a countersign here (GitOps).
	PolicyFromFile bool
	// PolicyPeople sign a policy change, its author counted; 1 needs
	// SinglePersonShop.
	PolicyPeople     int
	SinglePersonShop bool
	SystemPrompt     string // a file
	Tools            string
	Model            string
	ModelName        string
	ModelBaseURL     string
	ModelAPIKey      string
	ModelTimeout     time.Duration
	Demo             bool
	CustomerSecret   string
	// CustomerSecretPrevious still verifies tokens during a rotation.
	CustomerSecretPrevious string
	// DemoPage shows /demo even though a shop's customer secret is set.
	DemoPage bool
	// Limits of the customer tokens shops sign.
	CustomerTokenMaxAge   time.Duration
	CustomerTokenIssuer   string
	CustomerTokenAudience string
	WidgetOrigins         string
	MCPOrigins            string
	// Audit checkpoints: the signing key, where they go, how often, and the
	// public key that verifies them.
	AuditKey, AuditPublicKey, Checkpoints string
	CheckpointEvery                       time.Duration
	// The HTTP server's timeouts; zero takes the defaults (tests shorten them).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	TrustProxy                             bool
	// MaxArgs is the largest arguments a tool call may carry, in bytes.
	MaxArgs int
	// MCPHold is how long /mcp holds a call that waits for a person.
	MCPHold time.Duration
	// IntentWindow is how long the same intent asked again after a person
	// decided it gets that outcome (0: the default; gate.NoIntentWindow:
	// off, which --intent-window 0 says).
	IntentWindow time.Duration
	// Agents' limits (0: the defaults): calls a second and burst per
	// agent key; calls waiting for a person per agent, per agent session,
	// per conversation and per customer.
	AgentCallsPerSecond, AgentCallBurst                                   int
	AgentMaxWaiting, SessionMaxWaiting, RunMaxWaiting, CustomerMaxWaiting int
	TLSCert                                                               string
	TLSKey                                                                string
	// MetricsAddr serves Prometheus's /metrics ("": off); OTLPEndpoint is
	// where traces go ("": the OTEL_EXPORTER_OTLP_* variables, or off).
	MetricsAddr, OTLPEndpoint string
	// Reach: webhooks, Slack, email, escalation (reach.go).
	Reach reachConfig
	// SignIn is how staff sign in (signin.go).
	SignIn signInConfig
}

// newFlagSet is a command's flags, --db among them.
func newFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *config) {
	fs, cfg := bareFlagSet(name, stderr)
	fs.StringVar(&cfg.DB, "db", "countersign.db", "the database: a SQLite file, or a postgres:// URL")
	return fs, cfg
}

// bareFlagSet is the flags of a command that opens no database.
func bareFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *config) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, &config{}
}

func (cfg *config) policyFlag(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Policy, "policy", "", "policy file (YAML); empty: the built-in policy (the demo shop's with --demo)")
	cfg.toolsFlags(fs)
}

// toolsFlags are the tools a command decides about: a file's and the demo's.
func (cfg *config) toolsFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Tools, "tools", "", "tools file (YAML): your own tools, run over HTTP or decision-only")
	fs.BoolVar(&cfg.Demo, "demo", false, "the demo shop: its tools, its policy and its data (seeded, idempotent)")
}

// parse reads the command line, then fills each flag that was not given
// from COUNTERSIGN_<FLAG> in the environment (peterbourgon/ff: --model-name
// is COUNTERSIGN_MODEL_NAME; an empty variable counts as not set).
func parse(fs *flag.FlagSet, args []string) error {
	err := ff.Parse(fs, flagsFirst(fs, args), ff.WithEnvVarPrefix("COUNTERSIGN"))
	var parseErr interface{ Unwrap() error }
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return exitError{code: 0}
	case strings.HasPrefix(err.Error(), "error parsing commandline arguments") && errors.As(err, &parseErr):
		return exitError{code: 2} // the flag package said what was wrong, with the usage
	}
	return usageFailure(err)
}

// flagsFirst puts the flags before the other arguments, so that
// "agent revoke NAME --db FILE" reads as "agent revoke --db FILE NAME"
// (the flag package stops at the first argument that is not a flag).
// After "--" everything is an argument.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(append(flags, "--"), append(rest, args[i+1:]...)...)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			f := fs.Lookup(name)
			if f == nil || i+1 >= len(args) {
				continue // an unknown flag is the flag package's to refuse
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
				flags = append(flags, args[i])
			}
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return flags
	}
	return append(append(flags, "--"), rest...)
}

// usageFailure words ff's environment errors as the rest of the command
// line's: "COUNTERSIGN_MODEL_TIMEOUT: invalid value …".
func usageFailure(err error) error {
	msg := strings.TrimPrefix(err.Error(), "error parsing environment variables: ")
	if m := envErr.FindStringSubmatch(msg); m != nil {
		msg = m[1] + ": " + m[2]
	}
	return exitError{code: 2, msg: msg}
}

var envErr = regexp.MustCompile(`^error setting flag "[^"]+" from environment variable "([^"]+)": (.*)$`)
