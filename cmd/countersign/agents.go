package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

var cli = models.Actor{ID: "cli", Name: "command line"}

// cmdAgentAdd registers an outside agent and prints its key, once.
func cmdAgentAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("agent add", stderr)
	name := fs.String("name", "", "the agent's name, as the queue and the audit show it")
	limits := agentLimitFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usageError("agent add needs --name")
	}
	if err := checkAgentLimits(limits); err != nil {
		return err
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	key, _, err := accounts.New(store).AddAgent(ctx, *name, cli)
	if err != nil {
		return errors.New(fault.Message(err))
	}
	if *limits != (models.AgentLimits{}) {
		if err := store.SetAgentLimits(ctx, *name, *limits, cli); err != nil {
			return fmt.Errorf("%s was added with the instance's limits, not its own (%v): its key is %s", *name, err, key)
		}
	}
	fmt.Fprintln(stdout, key)
	return nil
}

// agentLimitFlags are an agent's own limits on the command line.
func agentLimitFlags(fs *flag.FlagSet) *agentLimits {
	l := &agentLimits{}
	fs.IntVar(&l.CallsPerSecond, "calls-per-second", 0, "this agent's own rate: calls a second after its burst (0: the instance's --agent-calls-per-second)")
	fs.IntVar(&l.CallBurst, "call-burst", 0, "this agent's own burst (0: the instance's --agent-call-burst)")
	fs.IntVar(&l.MaxWaiting, "max-waiting", 0, "how many of this agent's calls may wait for a person at once (0: the instance's --agent-max-waiting)")
	return l
}

type agentLimits = models.AgentLimits

func checkAgentLimits(l *agentLimits) error {
	for _, n := range []int{l.CallsPerSecond, l.CallBurst, l.MaxWaiting} {
		if n < 0 || n > 100_000 {
			return usageError("an agent's limits are numbers from 0 (the instance's) to 100000")
		}
	}
	return nil
}

// cmdAgentLimits sets an existing agent's own limits.
func cmdAgentLimits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("agent limits", stderr)
	limits := agentLimitFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("agent limits takes the agent's name")
	}
	if err := checkAgentLimits(limits); err != nil {
		return err
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.SetAgentLimits(ctx, fs.Arg(0), *limits, cli); errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("there is no agent named %q that is not revoked", fs.Arg(0))
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s\n", fs.Arg(0), describeLimits(*limits))
	return nil
}

func describeLimits(l models.AgentLimits) string {
	word := func(n int, what string) string {
		if n == 0 {
			return what + " the instance's"
		}
		return fmt.Sprintf("%s %d", what, n)
	}
	return word(l.CallsPerSecond, "calls a second:") + ", " + word(l.CallBurst, "burst:") + ", " + word(l.MaxWaiting, "waiting at once:")
}

// cmdAgentList prints the agents and whether their keys still work.
func cmdAgentList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("agent list", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	all, err := store.Agents(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADDED\tKEY")
	for _, a := range all {
		state := "works"
		if a.RevokedAt != nil {
			state = "revoked " + a.RevokedAt.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", a.Name, a.CreatedAt.UTC().Format("2006-01-02 15:04"), state)
	}
	return w.Flush()
}

// cmdAgentRevoke ends an agent's key at once.
func cmdAgentRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("agent revoke", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("agent revoke takes the agent's name")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	cancelled, err := accounts.New(store).RevokeAgent(ctx, fs.Arg(0), cli)
	if err != nil {
		return errors.New(fault.Message(err))
	}
	fmt.Fprintf(stdout, "the key of %s no longer works\n", fs.Arg(0))
	if len(cancelled) > 0 {
		fmt.Fprintf(stdout, "%d of its actions waiting for a person were cancelled: %s\n", len(cancelled), strings.Join(cancelled, ", "))
	}
	return nil
}

// cmdPolicyPeople says, or changes, how many admins sign a policy change in
// this deployment. It is kept in the database, so changing it is for
// whoever holds the database (a host), audited as done there; every
// instance started with another --policy-people then refuses to start.
func cmdPolicyPeople(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("policy people", stderr)
	single := fs.Bool("single-person-shop", false, "allows 1: an admin puts their own policy change in force")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError("policy people takes at most one number")
	}
	store, err := openExisting(cfg.DB)
	if err != nil {
		return err
	}
	defer store.Close()
	if fs.NArg() == 0 {
		n, err := store.PolicyPeople(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			fmt.Fprintln(stdout, "not set yet: the first instance to start sets it from --policy-people (2 when not given)")
			return nil
		}
		fmt.Fprintf(stdout, "%d\n", n)
		return nil
	}
	n, err := strconv.Atoi(fs.Arg(0))
	switch {
	case err != nil || n < 1 || n > 10:
		return usageError("policy people takes a number from 1 to 10")
	case n == 1 && !*single:
		return errors.New("1 lets an admin put their own policy change in force alone: add --single-person-shop to say you know")
	}
	if err := store.SetPolicyPeople(ctx, n, core.Hostname()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "a policy change now needs %d people; start every instance without --policy-people or with --policy-people %d\n", n, n)
	return nil
}
