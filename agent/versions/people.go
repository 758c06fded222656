package versions

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/models"
)

// Who signs a policy change: how many people the deployment asks for,
// who may govern, and how signatures are counted.

// People is how many people sign a change, the author counted: the
// deployment's number as last read.
func (s *Service) People() int { return int(s.people.Load()) }

func mayGovern(a models.Actor) bool { return a.ID == "" || a.Role == models.Admin }

// Settle reads the deployment's number of people who sign a change,
// storing this instance's when none is kept yet. An instance whose
// --policy-people disagrees with it, or that would follow a one-person
// deployment without --single-person-shop, refuses to start: how many
// people a change needs is not one instance's to say.
func (s *Service) Settle(ctx context.Context) error {
	n, err := s.cfg.Store.SettlePolicyPeople(ctx, s.People(), s.cfg.Host)
	if err != nil {
		return fmt.Errorf("the number of people who sign a policy change: %w", err)
	}
	switch {
	case s.cfg.People != 0 && s.cfg.People != n:
		return fmt.Errorf("--policy-people %d disagrees with this deployment, whose policy changes need %d people (kept in the database): start with --policy-people %d or without it; to change the number, run `countersign policy people N` on a host", s.cfg.People, n, n)
	case n == 1 && !s.cfg.SinglePerson:
		return errors.New("this deployment lets one admin put a policy change in force alone: start with --single-person-shop to say you know, or change that with `countersign policy people 2` on a host")
	}
	s.people.Store(int64(n))
	return nil
}

// peopleNow is the deployment's number, read again.
func (s *Service) peopleNow(ctx context.Context) (int, error) {
	n, err := s.cfg.Store.PolicyPeople(ctx)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		n = s.People()
	}
	s.people.Store(int64(n))
	return n, nil
}

func authorName(a models.Actor) string {
	if a.ID == "" {
		return "system"
	}
	return a.Name
}

// signers counts the people who signed: the approvers, and the author when
// a person proposed it, but for accounts disabled since (as staff changes
// and actions drop them: a signature stands for a person still trusted).
func signers(v *models.PolicyVersion, sigs []models.PolicySignature, disabled map[string]bool) int {
	seen := map[string]bool{}
	if v.AuthorID != "" && !disabled[v.AuthorID] {
		seen[v.AuthorID] = true
	}
	for _, sg := range sigs {
		if !disabled[sg.StaffID] {
			seen[sg.StaffID] = true
		}
	}
	return len(seen)
}

// signerIDs are the accounts that signed a version: its author and
// approvers.
func signerIDs(v *models.PolicyVersion, sigs []models.PolicySignature) []string {
	ids := []string{}
	if v.AuthorID != "" {
		ids = append(ids, v.AuthorID)
	}
	for _, sg := range sigs {
		ids = append(ids, sg.StaffID)
	}
	return ids
}
