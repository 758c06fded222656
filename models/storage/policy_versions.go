package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AddPolicyVersion stores a new version.
func (tx *Tx) AddPolicyVersion(v *models.PolicyVersion) error {
	v.CreatedAt = tx.now
	if v.Status == models.PolicyInForce {
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
func (tx *Tx) PolicyVersionLocked(id int64) (*models.PolicyVersion, error) {
	var v models.PolicyVersion
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&v, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// PolicyInForceLocked is the version in force, locked; nil when none is.
func (tx *Tx) PolicyInForceLocked() (*models.PolicyVersion, error) {
	var vs []models.PolicyVersion
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Where("status = ?", models.PolicyInForce).Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// SignPolicyVersion records an admin's approval; ErrConflict when they
// signed it already.
func (tx *Tx) SignPolicyVersion(s *models.PolicySignature) error {
	var n int64
	if err := tx.db.Model(&models.PolicySignature{}).Where("version_id = ? AND staff_id = ?", s.VersionID, s.StaffID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return models.ErrConflict
	}
	s.CreatedAt = tx.now
	return tx.db.Create(s).Error
}

// PolicySignatures are the approvals of a version, oldest first.
func (tx *Tx) PolicySignatures(id int64) ([]models.PolicySignature, error) {
	var out []models.PolicySignature
	err := tx.db.Where("version_id = ?", id).Order("id").Find(&out).Error
	return out, err
}

// PutPolicyInForce makes a proposed version the one in force and retires
// the one it replaces.
func (tx *Tx) PutPolicyInForce(id int64, by string) error {
	if _, err := tx.exec(`UPDATE policy_versions SET status = ?, ended_at = ?, ended_by = ? WHERE status = ?`,
		models.PolicyRetired, tx.now, by, models.PolicyInForce); err != nil {
		return fmt.Errorf("retire the policy in force: %w", err)
	}
	n, err := tx.exec(`UPDATE policy_versions SET status = ?, in_force_at = ? WHERE id = ? AND status = ?`,
		models.PolicyInForce, tx.now, id, models.PolicyProposed)
	if err != nil {
		return fmt.Errorf("put the policy in force: %w", err)
	}
	if n != 1 {
		return models.ErrConflict
	}
	return nil
}

// RejectPolicyVersion ends a proposed version, with the reason.
func (tx *Tx) RejectPolicyVersion(id int64, by, reason string) error {
	n, err := tx.exec(`UPDATE policy_versions SET status = ?, ended_at = ?, ended_by = ?, reason = ? WHERE id = ? AND status = ?`,
		models.PolicyRejected, tx.now, by, reason, id, models.PolicyProposed)
	if err != nil {
		return fmt.Errorf("reject the policy version: %w", err)
	}
	if n != 1 {
		return models.ErrConflict
	}
	return nil
}

// PolicyVersionByID reads one version.
func (s *Store) PolicyVersionByID(ctx context.Context, id int64) (*models.PolicyVersion, error) {
	var v models.PolicyVersion
	if err := s.db.WithContext(ctx).Take(&v, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// PolicyInForce is the version in force; nil when none was ever put in
// force (a database no server has started on).
func (s *Store) PolicyInForce(ctx context.Context) (*models.PolicyVersion, error) {
	var vs []models.PolicyVersion
	if err := s.db.WithContext(ctx).Where("status = ?", models.PolicyInForce).Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// PolicyVersions lists versions, newest first, at most limit (0: all).
func (s *Store) PolicyVersions(ctx context.Context, limit int) ([]models.PolicyVersion, error) {
	var out []models.PolicyVersion
	q := s.db.WithContext(ctx).Order("id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	err := q.Find(&out).Error
	return out, err
}

// ProposedWithHash is a proposed version of that YAML, if one waits.
func (s *Store) ProposedWithHash(ctx context.Context, hash string) (*models.PolicyVersion, error) {
	var vs []models.PolicyVersion
	if err := s.db.WithContext(ctx).Where("hash = ? AND status = ?", hash, models.PolicyProposed).Order("id DESC").Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return &vs[0], nil
}

// PolicySignaturesOf are the approvals of the versions given, by version.
func (s *Store) PolicySignaturesOf(ctx context.Context, ids []int64) (map[int64][]models.PolicySignature, error) {
	out := map[int64][]models.PolicySignature{}
	if len(ids) == 0 {
		return out, nil
	}
	var all []models.PolicySignature
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
	var got models.SharedSecret
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
		// Instances starting together settle it one at a time: the first
		// stores it, the others read it.
		if err := tx.Serialize(policyPeopleKey); err != nil {
			return err
		}
		var got models.SharedSecret
		err := tx.db.Take(&got, "name = ?", policyPeopleKey).Error
		if err == nil {
			stored, err = strconv.Atoi(got.Value)
			return err
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		stored = n
		if err := tx.db.Create(&models.SharedSecret{Name: policyPeopleKey, Value: strconv.Itoa(n), CreatedAt: tx.now}).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: models.EventPolicyPeopleSet, Subject: policyPeopleKey,
			Payload: models.PolicyPeopleSetPayload{To: n, Host: host, How: "the first instance's --policy-people"}})
	})
	return stored, err
}

// SetPolicyPeople changes the deployment's number of people, from a host
// (whoever runs it holds the database), audited.
func (s *Store) SetPolicyPeople(ctx context.Context, n int, host string) error {
	return s.Write(ctx, func(tx *Tx) error {
		var got models.SharedSecret
		from := 0
		if err := tx.db.Take(&got, "name = ?", policyPeopleKey).Error; err == nil {
			from, _ = strconv.Atoi(got.Value)
		}
		if err := tx.db.Save(&models.SharedSecret{Name: policyPeopleKey, Value: strconv.Itoa(n), CreatedAt: tx.now}).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "host:" + host, Kind: models.EventPolicyPeopleSet, Subject: policyPeopleKey,
			Payload: models.PolicyPeopleSetPayload{From: from, To: n, Host: host, How: "countersign policy people on the host"}})
	})
}

// PolicyVersionByHash is the newest version with that text's hash (what a
// call records as its policy version), whatever its status.
func (s *Store) PolicyVersionByHash(ctx context.Context, hash string) (*models.PolicyVersion, error) {
	var vs []models.PolicyVersion
	if err := s.db.WithContext(ctx).Where("hash = ?", hash).Order("id DESC").Limit(1).Find(&vs).Error; err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, models.ErrNotFound
	}
	return &vs[0], nil
}
