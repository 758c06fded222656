package versions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Origin says where the policy an instance starts with comes from.
type Origin struct {
	// File is the --policy file ("" for a built-in policy).
	File string
	// FileRules is --policy-from-file: the file is put in force as it is,
	// without a countersign here (its review happens where the file is
	// kept, GitOps). Otherwise a file that differs from the version in
	// force is proposed, as an upload would be.
	FileRules bool
}

// Adopt is what an instance does with its policy at start. On a database
// with no version yet, the policy is the first one, in force (there was
// nothing to countersign it against). Later, a policy file that differs
// from the version in force is put in force when the file rules, and is
// otherwise to be proposed (propose says so; ProposeFile does it, in the
// background, since it replays 30 days). A built-in policy never replaces
// a version in force.
func (s *Service) Adopt(ctx context.Context, p *policy.FilePolicy, o Origin) (propose bool, err error) {
	cur, err := s.cfg.Store.PolicyInForce(ctx)
	if err != nil {
		return false, err
	}
	if cur == nil {
		err := s.putFirst(ctx, p, o)
		if cur, _ = s.cfg.Store.PolicyInForce(ctx); cur == nil {
			return false, fmt.Errorf("seed the first policy version: %w", err)
		} // another instance seeded it at the same moment: that one is in force
	}
	if cur.Hash == p.Version() || o.File == "" {
		return false, nil
	}
	if !o.FileRules {
		return true, nil
	}
	return false, s.putFile(ctx, p, o.File)
}

func testsOf(ctx context.Context, p *policy.FilePolicy) string {
	t := Tests{Results: []TestResult{}}
	for _, r := range p.RunTests(ctx) {
		t.Results = append(t.Results, TestResult{Name: r.Name, Passed: r.Passed, Problem: r.Problem})
		if r.Passed {
			t.Passed++
		} else {
			t.Failed++
		}
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func (s *Service) putFirst(ctx context.Context, p *policy.FilePolicy, o Origin) error {
	source := "seed: the built-in policy"
	if o.File != "" {
		source = "seed: file " + o.File + " on " + s.cfg.Host
	}
	v := &models.PolicyVersion{Hash: p.Version(), YAML: p.YAML(), Source: source, AuthorName: "system", Note: "the first version of this database",
		ToolsVersion: s.cfg.Gate.ToolsVersion(), Tests: testsOf(ctx, p), PeopleNeeded: s.People(), Status: models.PolicyInForce}
	return s.cfg.Store.Write(ctx, func(tx *storage.Tx) error {
		cur, err := tx.PolicyInForceLocked()
		if err != nil {
			return err
		}
		if cur != nil {
			return nil
		}
		if err := tx.AddPolicyVersion(v); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventPolicyInForce, Subject: versionSubject(v.ID),
			Payload: inForcePayload(nil, v, "seeded")})
	})
}

// putFile puts a policy file in force as it is (--policy-from-file).
func (s *Service) putFile(ctx context.Context, p *policy.FilePolicy, file string) error {
	v := &models.PolicyVersion{Hash: p.Version(), YAML: p.YAML(), Source: "file " + file + " on " + s.cfg.Host + " (--policy-from-file)",
		AuthorName: "system", ToolsVersion: s.cfg.Gate.ToolsVersion(), Tests: testsOf(ctx, p), PeopleNeeded: s.People(), Status: models.PolicyProposed}
	err := s.cfg.Store.Write(ctx, func(tx *storage.Tx) error {
		cur, err := tx.PolicyInForceLocked()
		if err != nil {
			return err
		}
		if cur != nil && cur.Hash == v.Hash {
			return nil
		}
		if cur != nil {
			v.BaseID = cur.ID
		}
		if err := tx.AddPolicyVersion(v); err != nil {
			return err
		}
		if err := tx.PutPolicyInForce(v.ID, "system (--policy-from-file)"); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventPolicyInForce, Subject: versionSubject(v.ID),
			Payload: inForcePayload(cur, v, "from file")})
	})
	if err != nil {
		return err
	}
	s.announce(ctx)
	return nil
}

// ProposeFile proposes a policy file's YAML as the system, unless it is
// in force already or waits as a proposal. With the file ruling, it is put
// in force instead. SIGHUP does this, as an upload would.
func (s *Service) ProposeFile(ctx context.Context, p *policy.FilePolicy, o Origin) (*Version, error) {
	if o.FileRules {
		return nil, s.putFile(ctx, p, o.File)
	}
	cur, err := s.cfg.Store.PolicyInForce(ctx)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.Hash == p.Version() {
		return nil, nil
	}
	if waiting, err := s.cfg.Store.ProposedWithHash(ctx, p.Version()); err != nil || waiting != nil {
		return nil, err
	}
	v, err := s.Propose(ctx, Proposal{YAML: []byte(p.YAML()), Source: "file " + o.File + " on " + s.cfg.Host, By: models.SystemActor,
		Note: "read from the policy file; it is in force once countersigned"})
	if fault.CodeOf(err) == fault.Conflict {
		return nil, nil // in force by now
	}
	return v, err
}

// InForce loads the version in force against a registry (the tools a
// reload offers): nil when no version is in force yet.
func (s *Service) InForce(ctx context.Context, reg *tools.Registry) (*policy.FilePolicy, *models.PolicyVersion, error) {
	cur, err := s.cfg.Store.PolicyInForce(ctx)
	if err != nil || cur == nil {
		return nil, cur, err
	}
	p, err := policy.LoadPolicy([]byte(cur.YAML), fmt.Sprintf("version %d", cur.ID), reg)
	return p, cur, err
}

// Sync puts in force here the version in force in the database, if it is
// not already. When it does not load against this instance's tools, or
// fails its tests here, the instance fails closed (gate.FailClosed): it
// says so and decides nothing with the version before.
func (s *Service) Sync(ctx context.Context) error {
	s.syncing.Lock()
	defer s.syncing.Unlock()
	g := s.cfg.Gate
	p, cur, err := s.InForce(ctx, g.Tools())
	if cur == nil {
		if err != nil && !s.synced.Load() && ctx.Err() == nil {
			// Never read yet (at start): which version is in force is not
			// known, so nothing is decided with the file until it is.
			cause := fmt.Errorf("the version in force could not be read: %w", err)
			if ferr := g.FailClosed(ctx, s.cfg.Host, &models.PolicyVersion{Hash: "unread"}, cause); ferr != nil {
				s.log.Error("could not record that the policy in force could not be read", "err", ferr)
			}
		}
		return err
	}
	if g.Policy().Version() == cur.Hash || (err == nil && g.Policy().Version() == p.Version()) {
		s.synced.Store(true) // (a version stored before texts were normalized hashes otherwise once loaded)
		return nil
	}
	if err == nil {
		if failed := policy.Failing(p.RunTests(ctx)); len(failed) > 0 {
			err = fmt.Errorf("%d of its tests fail against this instance's tools (first: %s: %s)", len(failed), failed[0].Name, failed[0].Problem)
		}
	}
	if err == nil {
		_, err = g.PutPolicyInForce(ctx, p, fmt.Sprintf("policy version %d in force", cur.ID), s.cfg.Host)
	}
	if err != nil {
		if ferr := g.FailClosed(ctx, s.cfg.Host, cur, err); ferr != nil {
			s.log.Error("could not record that the policy in force did not load", "err", ferr)
		}
		return fmt.Errorf("policy version %d: %w", cur.ID, err)
	}
	s.synced.Store(true)
	s.log.Info("policy version in force", "policy_version_id", cur.ID, "hash", cur.Hash[:12])
	return nil
}
