package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// config is every flag of every subcommand; each subcommand registers the
// ones it uses.
type config struct {
	Addr           string
	DB             string
	Policy         string
	ShadowPolicy   string
	SystemPrompt   string // a file
	Tools          string
	Model          string
	ModelName      string
	ModelBaseURL   string
	ModelAPIKey    string
	ModelTimeout   time.Duration
	Demo           bool
	CustomerSecret string
	// CustomerSecretPrevious still verifies tokens during a rotation.
	CustomerSecretPrevious string
	// DemoPage shows /demo even though a shop's customer secret is set.
	DemoPage bool
	// Limits of the customer tokens shops sign.
	CustomerTokenMaxAge   time.Duration
	CustomerTokenIssuer   string
	CustomerTokenAudience string
	WidgetOrigins         string
	// Audit checkpoints: the signing key, where they go, how often, and the
	// public key that verifies them.
	AuditKey, AuditPublicKey, Checkpoints string
	CheckpointEvery                       time.Duration
	// The HTTP server's timeouts; zero takes the defaults (tests shorten them).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	TrustProxy                             bool
	// MCPHold is how long /mcp holds a call that waits for a person.
	MCPHold time.Duration
	TLSCert string
	TLSKey  string
	// Reach: webhooks, Slack, email, escalation (reach.go).
	Reach reachConfig
}

func newFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *config) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	fs.StringVar(&cfg.DB, "db", "countersign.db", "the database: a SQLite file, or a postgres:// URL")
	return fs, cfg
}

func (cfg *config) policyFlag(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Policy, "policy", "", "policy file (YAML); empty: the built-in policy (the demo shop's with --demo)")
	fs.StringVar(&cfg.Tools, "tools", "", "tools file (YAML): your own tools, run over HTTP or decision-only")
	fs.BoolVar(&cfg.Demo, "demo", false, "the demo shop: its tools, its policy and its data (seeded, idempotent)")
}

// parse reads the command line, then fills each flag that was not given
// from COUNTERSIGN_<FLAG> in the environment.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return exitError{code: 2}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "COUNTERSIGN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s: %w", env, serr)
			}
		}
	})
	return err
}
