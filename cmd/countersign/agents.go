package main

import (
	"context"
	"errors"
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
	if err := parse(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usageError("agent add needs --name")
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
	fmt.Fprintln(stdout, key)
	return nil
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
