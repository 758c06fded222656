package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Policy versions live in the database: every version proposed, with its
// tests and its replay, and the one in force for every instance sharing
// the database. A version's YAML, tests and replay never change once it is
// proposed: changing a version is proposing another.

// PolicyStatus is where a policy version is in its life.
type PolicyStatus string

// Policy version statuses: proposed waits for admins to countersign it; one
// version is in force at a time; the one it replaced is retired; a rejected
// one never was in force.
const (
	PolicyProposed PolicyStatus = "proposed"
	PolicyInForce  PolicyStatus = "in_force"
	PolicyRetired  PolicyStatus = "retired"
	PolicyRejected PolicyStatus = "rejected"
)

// PolicyStatuses lists every policy version status.
var PolicyStatuses = []PolicyStatus{PolicyProposed, PolicyInForce, PolicyRetired, PolicyRejected}

// PolicyVersion is one version of the policy, as proposed.
type PolicyVersion struct {
	ID   int64  `gorm:"primaryKey;autoIncrement"`
	Hash string `gorm:"size:64;index"` // SHA-256 of YAML: what calls record as their policy_version
	YAML string `gorm:"type:text"`
	Note string `gorm:"type:text"`
	// Source says where it came from: "page", "upload", "api", "file …",
	// "suggestion …", "seed".
	Source     string `gorm:"size:300"`
	AuthorID   string `gorm:"size:64"` // a staff id, "" for the system
	AuthorName string `gorm:"size:200"`
	// ToolsVersion is the tools it was tested and replayed against; Tests
	// and Replay are what that found (JSON), ReplayDigest the SHA-256 of
	// Replay: an approver's form carries it, so what is approved is the
	// replay that was shown.
	ToolsVersion string `gorm:"size:64"`
	Tests        string `gorm:"type:text"`
	Replay       string `gorm:"type:text"`
	ReplayDigest string `gorm:"size:64"`
	// BaseID is the version in force when it was proposed (0: none): it
	// can only go in force over that one.
	BaseID int64
	// PeopleNeeded is how many people, the author among them, must sign it.
	PeopleNeeded int
	Status       PolicyStatus `gorm:"size:16;uniqueIndex:idx_policy_versions_in_force,where:status = 'in_force'"`
	CreatedAt    time.Time
	InForceAt    *time.Time
	EndedAt      *time.Time // retired or rejected
	EndedBy      string     `gorm:"size:200"`
	Reason       string     `gorm:"type:text"` // a rejection's
}

// PolicySignature is one admin's approval of a proposed version.
type PolicySignature struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	VersionID int64  `gorm:"uniqueIndex:idx_policy_signatures_once,priority:1;not null"`
	StaffID   string `gorm:"size:64;uniqueIndex:idx_policy_signatures_once,priority:2"`
	StaffName string `gorm:"size:200"`
	Note      string `gorm:"type:text"`
	CreatedAt time.Time
}

// AddPolicyVersion stores a new version.
func (tx *Tx) AddPolicyVersion(v *PolicyVersion) error {
	v.CreatedAt = tx.now
	if v.Status == PolicyInForce {
		now := tx.now
		v.InForceAt = &now
	}
	if err := tx.db.Create(v).Error; err != nil {
		return fmt.Errorf("store policy version: %w", err)
	}
	return nil
}

// PolicyVersionLocked reads a version to change it (locked on PostgreSQL
// until the unit ends).
func (tx *Tx) PolicyVersionLocked(id int64) (*PolicyVersion, error) {
	var v PolicyVersion
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&v, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// PolicyInForceLocked is the version in force, locked; nil when none is.
func (tx *Tx) PolicyInForceLocked() (*PolicyVersion, error) {
	var vs []PolicyVersion
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Where("status = ?", PolicyInForce).Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// SignPolicyVersion records an admin's approval; ErrConflict when they
// signed it already.
func (tx *Tx) SignPolicyVersion(s *PolicySignature) error {
	var n int64
	if err := tx.db.Model(&PolicySignature{}).Where("version_id = ? AND staff_id = ?", s.VersionID, s.StaffID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return ErrConflict
	}
	s.CreatedAt = tx.now
	return tx.db.Create(s).Error
}

// PolicySignatures are the approvals of a version, oldest first.
func (tx *Tx) PolicySignatures(id int64) ([]PolicySignature, error) {
	var out []PolicySignature
	err := tx.db.Where("version_id = ?", id).Order("id").Find(&out).Error
	return out, err
}

// PutPolicyInForce makes a proposed version the one in force and retires
// the one it replaces.
func (tx *Tx) PutPolicyInForce(id int64, by string) error {
	if _, err := tx.exec(`UPDATE policy_versions SET status = ?, ended_at = ?, ended_by = ? WHERE status = ?`,
		PolicyRetired, tx.now, by, PolicyInForce); err != nil {
		return fmt.Errorf("retire the policy in force: %w", err)
	}
	n, err := tx.exec(`UPDATE policy_versions SET status = ?, in_force_at = ? WHERE id = ? AND status = ?`,
		PolicyInForce, tx.now, id, PolicyProposed)
	if err != nil {
		return fmt.Errorf("put the policy in force: %w", err)
	}
	if n != 1 {
		return ErrConflict
	}
	return nil
}

// RejectPolicyVersion ends a proposed version, with the reason.
func (tx *Tx) RejectPolicyVersion(id int64, by, reason string) error {
	n, err := tx.exec(`UPDATE policy_versions SET status = ?, ended_at = ?, ended_by = ?, reason = ? WHERE id = ? AND status = ?`,
		PolicyRejected, tx.now, by, reason, id, PolicyProposed)
	if err != nil {
		return fmt.Errorf("reject the policy version: %w", err)
	}
	if n != 1 {
		return ErrConflict
	}
	return nil
}

// PolicyVersionByID reads one version.
func (s *Store) PolicyVersionByID(ctx context.Context, id int64) (*PolicyVersion, error) {
	var v PolicyVersion
	if err := s.db.WithContext(ctx).Take(&v, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// PolicyInForce is the version in force; nil when none was ever put in
// force (a database no server has started on).
func (s *Store) PolicyInForce(ctx context.Context) (*PolicyVersion, error) {
	var vs []PolicyVersion
	if err := s.db.WithContext(ctx).Where("status = ?", PolicyInForce).Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// PolicyVersions lists versions, newest first, at most limit (0: all).
func (s *Store) PolicyVersions(ctx context.Context, limit int) ([]PolicyVersion, error) {
	var out []PolicyVersion
	q := s.db.WithContext(ctx).Order("id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	err := q.Find(&out).Error
	return out, err
}

// ProposedWithHash is a proposed version of that YAML, if one waits.
func (s *Store) ProposedWithHash(ctx context.Context, hash string) (*PolicyVersion, error) {
	var vs []PolicyVersion
	if err := s.db.WithContext(ctx).Where("hash = ? AND status = ?", hash, PolicyProposed).Order("id DESC").Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// PolicySignaturesOf are the approvals of the versions given, by version.
func (s *Store) PolicySignaturesOf(ctx context.Context, ids []int64) (map[int64][]PolicySignature, error) {
	out := map[int64][]PolicySignature{}
	if len(ids) == 0 {
		return out, nil
	}
	var all []PolicySignature
	if err := s.db.WithContext(ctx).Where("version_id IN ?", ids).Order("id").Find(&all).Error; err != nil {
		return nil, err
	}
	for _, sg := range all {
		out[sg.VersionID] = append(out[sg.VersionID], sg)
	}
	return out, nil
}

// policyPeopleKey keeps, among the values the instances share, how many
// people sign a policy change in this deployment.
const policyPeopleKey = "policy-people"

// PolicyPeople is how many people sign a policy change in this deployment
// (0: not set yet).
func (s *Store) PolicyPeople(ctx context.Context) (int, error) {
	var got SharedSecret
	err := s.db.WithContext(ctx).Take(&got, "name = ?", policyPeopleKey).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(got.Value)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("the stored number of people who sign a policy change is not a number: %q", got.Value)
	}
	return n, nil
}

// SettlePolicyPeople stores n as the deployment's number of people when
// none is stored yet (the first instance's flag decides, audited) and
// returns the number stored.
func (s *Store) SettlePolicyPeople(ctx context.Context, n int, host string) (int, error) {
	var stored int
	err := s.Write(ctx, func(tx *Tx) error {
		var got SharedSecret
		err := tx.db.Take(&got, "name = ?", policyPeopleKey).Error
		if err == nil {
			stored, err = strconv.Atoi(got.Value)
			return err
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		stored = n
		if err := tx.db.Create(&SharedSecret{Name: policyPeopleKey, Value: strconv.Itoa(n), CreatedAt: tx.now}).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: SystemActor.String(), Kind: EventPolicyPeopleSet, Subject: policyPeopleKey,
			Payload: PolicyPeopleSetPayload{To: n, Host: host, How: "the first instance's --policy-people"}})
	})
	return stored, err
}

// SetPolicyPeople changes the deployment's number of people, from a host
// (whoever runs it holds the database), audited.
func (s *Store) SetPolicyPeople(ctx context.Context, n int, host string) error {
	return s.Write(ctx, func(tx *Tx) error {
		var got SharedSecret
		from := 0
		if err := tx.db.Take(&got, "name = ?", policyPeopleKey).Error; err == nil {
			from, _ = strconv.Atoi(got.Value)
		}
		if err := tx.db.Save(&SharedSecret{Name: policyPeopleKey, Value: strconv.Itoa(n), CreatedAt: tx.now}).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: "host:" + host, Kind: EventPolicyPeopleSet, Subject: policyPeopleKey,
			Payload: PolicyPeopleSetPayload{From: from, To: n, Host: host, How: "countersign policy people on the host"}})
	})
}
