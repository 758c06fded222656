// Package versions governs the policy: every version lives in the
// database, one is in force for every instance, and a change is
// countersigned. An admin proposes a version; Countersign runs its tests
// and replays it over the last 30 days; other admins, not the author,
// approve it until enough people have signed (two by default, the author
// counted), and only then it is in force. Every instance follows the
// version in force (NOTIFY on PostgreSQL) and, when it cannot load it,
// decides nothing rather than decide with the old one.
package versions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// ReplayPeriod is how far back a proposed version is replayed.
const ReplayPeriod = 30 * 24 * time.Hour

// MaxYAML bounds a proposed version.
const MaxYAML = 256 << 10

// Config is what the service works with.
type Config struct {
	Store *storage.Store
	Gate  *gate.Gate
	Log   *slog.Logger
	// People is how many people must sign a change, its author counted,
	// as this instance's flag says (0: whatever the database keeps; 2 on
	// a new one). The number is the deployment's, kept in the database:
	// the first instance's flag sets it, and an instance whose flag
	// disagrees refuses to start (Settle). 1 is refused unless
	// SinglePerson says this is a single-person shop.
	People       int
	SinglePerson bool
	// Host names this instance in what it records.
	Host string
	// Announce tells the other instances that the version in force
	// changed (the core's bus; nil: nobody else to tell).
	Announce func()
	// SignWithPasskey asks every approval of a version for the admin's
	// passkey signature (--sign-with-passkey).
	SignWithPasskey bool
}

// Service proposes, countersigns and follows policy versions.
type Service struct {
	cfg    Config
	log    *slog.Logger
	people atomic.Int64 // the deployment's, as last read
	// synced is whether this instance has read the version in force once.
	synced atomic.Bool
	// syncing makes one instance load one version at a time.
	syncing sync.Mutex
}

// New checks the config and builds the service.
func New(cfg Config) (*Service, error) {
	people := cfg.People
	switch {
	case people == 0:
		people = 2
	case people < 0:
		return nil, fmt.Errorf("policy changes need at least one person, not %d", people)
	case people == 1 && !cfg.SinglePerson:
		return nil, errors.New("a policy change signed by its author alone needs --single-person-shop: by default a second admin countersigns every change")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	vs := &Service{cfg: cfg, log: log}
	vs.people.Store(int64(people))
	return vs, nil
}

// Tests is what a version's own tests found.
type Tests struct {
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"`
	Results []TestResult `json:"results"`
}

// TestResult is one of a version's tests.
type TestResult struct {
	Name    string `json:"name"`
	Passed  bool   `json:"passed"`
	Problem string `json:"problem,omitempty"`
}

// Signature is an admin's approval of a version.
type Signature struct {
	StaffID string    `json:"staff_id"`
	Name    string    `json:"name"`
	Note    string    `json:"note,omitempty"`
	At      time.Time `json:"at"`
}

// Version is a policy version as people and the API see it.
type Version struct {
	ID           int64               `json:"id"`
	Status       models.PolicyStatus `json:"status"`
	Hash         string              `json:"hash"`
	Author       string              `json:"author"`
	AuthorID     string              `json:"author_id,omitempty"`
	Source       string              `json:"source"`
	Note         string              `json:"note,omitempty"`
	CreatedAt    time.Time           `json:"created_at"`
	InForceAt    *time.Time          `json:"in_force_at,omitempty"`
	EndedAt      *time.Time          `json:"ended_at,omitempty"`
	EndedBy      string              `json:"ended_by,omitempty"`
	Reason       string              `json:"reason,omitempty"`
	BaseID       int64               `json:"base_id,omitempty"`
	ToolsVersion string              `json:"tools_version"`
	Tests        Tests               `json:"tests"`
	Replay       *gate.Replay        `json:"replay"`
	ReplayDigest string              `json:"replay_digest"`
	PeopleNeeded int                 `json:"people_needed"`
	Signatures   []Signature         `json:"signatures"`
	YAML         string              `json:"yaml"`
}

// view turns a stored version and its signatures into a Version.
func view(v *models.PolicyVersion, sigs []models.PolicySignature) *Version {
	out := &Version{ID: v.ID, Status: v.Status, Hash: v.Hash, Author: v.AuthorName, AuthorID: v.AuthorID, Source: v.Source, Note: v.Note,
		CreatedAt: v.CreatedAt, InForceAt: v.InForceAt, EndedAt: v.EndedAt, EndedBy: v.EndedBy, Reason: v.Reason, BaseID: v.BaseID,
		ToolsVersion: v.ToolsVersion, ReplayDigest: v.ReplayDigest, PeopleNeeded: v.PeopleNeeded, Signatures: []Signature{}, YAML: v.YAML,
		Tests: Tests{Results: []TestResult{}}}
	if v.Tests != "" {
		_ = json.Unmarshal([]byte(v.Tests), &out.Tests)
	}
	if v.Replay != "" {
		var r gate.Replay
		if json.Unmarshal([]byte(v.Replay), &r) == nil {
			out.Replay = &r
		}
	}
	for _, sg := range sigs {
		out.Signatures = append(out.Signatures, Signature{StaffID: sg.StaffID, Name: sg.StaffName, Note: sg.Note, At: sg.CreatedAt})
	}
	return out
}

// List is every version, newest first.
func (s *Service) List(ctx context.Context) ([]*Version, error) {
	vs, err := s.cfg.Store.PolicyVersions(ctx, 0)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	sigs, err := s.cfg.Store.PolicySignaturesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*Version, len(vs))
	for i := range vs {
		out[i] = view(&vs[i], sigs[vs[i].ID])
	}
	return out, nil
}

// Get is one version.
func (s *Service) Get(ctx context.Context, id int64) (*Version, error) {
	v, err := s.cfg.Store.PolicyVersionByID(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, fault.Errorf(fault.NotFound, "there is no policy version %d", id)
	}
	if err != nil {
		return nil, err
	}
	sigs, err := s.cfg.Store.PolicySignaturesOf(ctx, []int64{id})
	if err != nil {
		return nil, err
	}
	return view(v, sigs[id]), nil
}

// ParseID reads a version id as a path gives it.
func ParseID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "v"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fault.Errorf(fault.NotFound, "there is no policy version %q", s)
	}
	return id, nil
}

// Checked is a YAML loaded against the tools in force, with its tests run.
type Checked struct {
	Policy *policy.FilePolicy
	Tests  Tests
}

// Check loads a YAML against the tools in force and runs its tests. A YAML
// that does not load is refused with the loader's words (line and column).
func (s *Service) Check(ctx context.Context, yaml []byte, source string) (*Checked, error) {
	switch {
	case len(strings.TrimSpace(string(yaml))) == 0:
		return nil, fault.Errorf(fault.Invalid, "the policy is empty")
	case len(yaml) > MaxYAML:
		return nil, fault.Errorf(fault.Invalid, "the policy is over 256 KiB")
	}
	p, err := policy.LoadPolicy(yaml, source, s.cfg.Gate.Tools())
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "%s", strings.TrimPrefix(err.Error(), "policy "+source+": "))
	}
	ch := &Checked{Policy: p, Tests: Tests{Results: []TestResult{}}}
	for _, r := range p.RunTests(ctx) {
		ch.Tests.Results = append(ch.Tests.Results, TestResult{Name: r.Name, Passed: r.Passed, Problem: r.Problem})
		if r.Passed {
			ch.Tests.Passed++
		} else {
			ch.Tests.Failed++
		}
	}
	return ch, nil
}

// TestsFailed is the error of a version whose tests fail: it cannot be
// proposed. Tests says which.
type TestsFailed struct{ Tests Tests }

func (e *TestsFailed) Error() string {
	var names []string
	for _, r := range e.Tests.Results {
		if !r.Passed {
			names = append(names, fmt.Sprintf("%q: %s", r.Name, r.Problem))
		}
	}
	return fmt.Sprintf("%d of the policy's %d tests fail, so it cannot be proposed: %s", e.Tests.Failed, len(e.Tests.Results), strings.Join(names, "; "))
}

// Proposal is a version to propose.
type Proposal struct {
	YAML   []byte
	Note   string
	Source string // "page", "upload", "api", "file …", "suggestion …"
	By     models.Actor
}

// Propose stores a proposed version: it must load against the tools in
// force and pass its own tests; it is replayed over the last 30 days, and
// that replay is what its approvers see and approve. Only admins (and the
// system, for a policy file) propose.
func (s *Service) Propose(ctx context.Context, p Proposal) (*Version, error) {
	if !mayGovern(p.By) {
		return nil, fault.Errorf(fault.Forbidden, "only admins propose policy versions")
	}
	ch, err := s.Check(ctx, p.YAML, "proposed")
	if err != nil {
		return nil, err
	}
	if ch.Tests.Failed > 0 {
		tf := &TestsFailed{Tests: ch.Tests}
		return nil, &fault.Error{Code: fault.Invalid, Message: tf.Error(), Err: tf}
	}
	if len(p.Note) > 2000 {
		return nil, fault.Errorf(fault.Invalid, "the note is over 2,000 characters")
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err := gate.ReplayPolicy(rctx, s.cfg.Store, s.cfg.Gate.Tools(), ch.Policy, time.Now().Add(-ReplayPeriod).UTC())
	if err != nil {
		return nil, fmt.Errorf("replay the proposed policy: %w", err)
	}
	people, err := s.peopleNow(ctx)
	if err != nil {
		return nil, err
	}
	tests, _ := json.Marshal(ch.Tests)
	replay, _ := json.Marshal(rep)
	digest := sha256.Sum256(replay)
	v := &models.PolicyVersion{Hash: ch.Policy.Version(), YAML: ch.Policy.YAML(), Note: p.Note, Source: p.Source,
		AuthorID: p.By.ID, AuthorName: authorName(p.By), ToolsVersion: s.cfg.Gate.ToolsVersion(), Tests: string(tests),
		Replay: string(replay), ReplayDigest: hex.EncodeToString(digest[:]), PeopleNeeded: people, Status: models.PolicyProposed}
	err = s.cfg.Store.Write(ctx, func(tx *storage.Tx) error {
		cur, err := tx.PolicyInForceLocked()
		if err != nil {
			return err
		}
		if cur != nil {
			if cur.Hash == v.Hash {
				return fault.Errorf(fault.Conflict, "this policy is the version in force already (version %d)", cur.ID)
			}
			v.BaseID = cur.ID
		}
		if err := tx.AddPolicyVersion(v); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: p.By.String(), Kind: models.EventPolicyProposed, Subject: versionSubject(v.ID),
			Payload: models.PolicyProposedPayload{BaseID: v.BaseID, Hash: v.Hash, Note: v.Note, PeopleNeeded: v.PeopleNeeded,
				ReplayDigest: v.ReplayDigest, Source: v.Source}})
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("policy version proposed", "policy_version_id", v.ID, "hash", v.Hash[:12], "by", p.By.String(), "source", v.Source)
	return view(v, nil), nil
}

func versionSubject(id int64) string { return "policy:" + strconv.FormatInt(id, 10) }

// Approval is an admin's approval of a proposed version.
type Approval struct {
	By   models.Actor
	Note string
	// ReplayDigest, when given, must be the version's: the replay the
	// approver was shown is the one approved.
	ReplayDigest string
	// Passkey is the admin's passkey signature over this approval, checked
	// against their passkey (web); required with SignWithPasskey.
	Passkey *models.PasskeySignature
}

// Approve signs a proposed version. The author cannot (unless the shop is
// a single person's); when enough people have signed, the version is in
// force on every instance. It is refused when the tools changed since it
// was tested, or another version went in force since it was proposed: it
// must be proposed again, with a new replay.
func (s *Service) Approve(ctx context.Context, id int64, a Approval) (*Version, error) {
	if a.By.ID == "" || a.By.Role != models.Admin {
		return nil, fault.Errorf(fault.Forbidden, "only admins approve policy versions")
	}
	var v *models.PolicyVersion
	var sigs []models.PolicySignature
	inForce := false
	// A version needs the people it was proposed with, and never fewer
	// than the deployment needs now (a version proposed through an
	// instance that said 1 is not one person's on one that says 2).
	now, err := s.peopleNow(ctx)
	if err != nil {
		return nil, err
	}
	err = s.cfg.Store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		inForce = false
		if v, err = tx.PolicyVersionLocked(id); errors.Is(err, models.ErrNotFound) {
			return fault.Errorf(fault.NotFound, "there is no policy version %d", id)
		} else if err != nil {
			return err
		}
		need := max(v.PeopleNeeded, now)
		switch {
		case v.Status != models.PolicyProposed:
			return fault.Errorf(fault.Conflict, "policy version %d is %s, not proposed", id, strings.ReplaceAll(string(v.Status), "_", " "))
		case v.AuthorID == a.By.ID && need > 1:
			return fault.Errorf(fault.Forbidden, "you proposed policy version %d: another admin must approve it", id)
		case a.ReplayDigest != "" && a.ReplayDigest != v.ReplayDigest:
			return fault.Errorf(fault.Conflict, "the replay you were shown is not policy version %d's: open it again", id)
		case v.ToolsVersion != s.cfg.Gate.ToolsVersion():
			return fault.Errorf(fault.Conflict, "the tools changed since policy version %d was tested and replayed: propose it again", id)
		}
		cur, err := tx.PolicyInForceLocked()
		if err != nil {
			return err
		}
		if cur != nil && cur.ID != v.BaseID {
			return fault.Errorf(fault.Conflict, "policy version %d went in force after version %d was proposed over version %d: propose it again over the version in force", cur.ID, id, v.BaseID)
		}
		signed, err := models.SignedOver(a.Passkey, s.cfg.SignWithPasskey, models.PolicySubject(id), v.Hash)
		if err != nil {
			return err
		}
		if err := tx.SignPolicyVersion(&models.PolicySignature{VersionID: id, StaffID: a.By.ID, StaffName: a.By.Name, Note: a.Note, Passkey: signed}); errors.Is(err, models.ErrConflict) {
			return fault.Errorf(fault.Conflict, "you approved policy version %d already", id)
		} else if err != nil {
			return err
		}
		if sigs, err = tx.PolicySignatures(id); err != nil {
			return err
		}
		disabled, err := tx.DisabledStaff(signerIDs(v, sigs))
		if err != nil {
			return err
		}
		people := signers(v, sigs, disabled)
		if err := tx.Audit(models.Event{Actor: a.By.String(), Kind: models.EventPolicySigned, Subject: versionSubject(id),
			Payload: models.PolicySignedPayload{Hash: v.Hash, Note: a.Note, PeopleNeeded: need, ReplayDigest: v.ReplayDigest, Signatures: people}}); err != nil {
			return err
		}
		if people < need {
			return nil
		}
		if err := tx.PutPolicyInForce(id, a.By.String()); err != nil {
			return err
		}
		inForce = true
		v.Status = models.PolicyInForce
		return tx.Audit(models.Event{Actor: a.By.String(), Kind: models.EventPolicyInForce, Subject: versionSubject(id),
			Payload: inForcePayload(cur, v, "countersigned")})
	})
	if err != nil {
		return nil, err
	}
	if inForce {
		s.announce(ctx)
	}
	return s.Get(ctx, id)
}

func inForcePayload(from, to *models.PolicyVersion, how string) models.PolicyInForcePayload {
	p := models.PolicyInForcePayload{Hash: to.Hash, How: how}
	if from != nil {
		p.FromID, p.FromHash = from.ID, from.Hash
	}
	return p
}

// announce tells every instance that a version went in force, and puts it
// in force here.
func (s *Service) announce(ctx context.Context) {
	if s.cfg.Announce != nil {
		s.cfg.Announce()
	}
	if err := s.Sync(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("could not put the policy in force here", "err", err)
	}
}

// Reject ends a proposed version, with the reason: its author may withdraw
// it, any admin reject it.
func (s *Service) Reject(ctx context.Context, id int64, by models.Actor, reason string) (*Version, error) {
	if by.ID == "" || by.Role != models.Admin {
		return nil, fault.Errorf(fault.Forbidden, "only admins reject policy versions")
	}
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return nil, fault.Errorf(fault.Invalid, "say why the version is rejected")
	case len(reason) > 2000:
		return nil, fault.Errorf(fault.Invalid, "the reason is over 2,000 characters")
	}
	err := s.cfg.Store.Write(ctx, func(tx *storage.Tx) error {
		v, err := tx.PolicyVersionLocked(id)
		if errors.Is(err, models.ErrNotFound) {
			return fault.Errorf(fault.NotFound, "there is no policy version %d", id)
		} else if err != nil {
			return err
		}
		if v.Status != models.PolicyProposed {
			return fault.Errorf(fault.Conflict, "policy version %d is %s, not proposed", id, strings.ReplaceAll(string(v.Status), "_", " "))
		}
		if err := tx.RejectPolicyVersion(id, by.String(), reason); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: by.String(), Kind: models.EventPolicyRejected, Subject: versionSubject(id),
			Payload: models.PolicyRejectedPayload{Hash: v.Hash, Reason: reason}})
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}
