package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
)

// Instance is this process's id among the servers sharing the database.
func (s *Store) Instance() string { return s.self }

// Beat records that this instance is alive (creating its row the first
// time). A server calls it every few seconds.
func (s *Store) Beat(ctx context.Context, host string) error {
	return s.Write(ctx, func(tx *Tx) error {
		n, err := tx.exec(`UPDATE instances SET heartbeat_at = ? WHERE id = ?`, tx.now, s.self)
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		if n == 0 {
			if _, err := tx.exec(`INSERT INTO instances (id, host, started_at, heartbeat_at) VALUES (?, ?, ?, ?)`,
				s.self, host, tx.now, tx.now); err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
		}
		return nil
	})
}

// Leave removes this instance's row as it stops: what it leaves behind is
// recovered at once, without waiting for its beat to go stale.
func (s *Store) Leave(ctx context.Context) error {
	return s.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(`DELETE FROM instances WHERE id = ?`, s.self)
		return err
	})
}

// LiveInstances are the instances that beat within the last alive.
func (s *Store) LiveInstances(ctx context.Context, alive time.Duration) ([]models.Instance, error) {
	var out []models.Instance
	err := s.db.WithContext(ctx).Where("heartbeat_at >= ?", s.now().Add(-alive)).Order("started_at").Find(&out).Error
	return out, err
}

// OrphanedCalls lists calls in a status (executing or approved) that no
// live instance owns: their owner stopped beating alive ago, left, or never
// beat; this instance's own calls are not orphans. With alive 0 every call
// in that status is listed: the start of the one server of a SQLite file,
// which owns whatever a process before it left.
func (s *Store) OrphanedCalls(ctx context.Context, status models.CallStatus, alive time.Duration, limit int) ([]models.ToolCall, error) {
	var out []models.ToolCall
	q := s.db.WithContext(ctx).Where("status = ?", status).Where(notSucceeded)
	if alive > 0 {
		q = q.Where("owner <> ?", s.self).
			Where("owner NOT IN (SELECT id FROM instances WHERE heartbeat_at >= ?)", s.now().Add(-alive))
	}
	err := q.Order("created_at, id").Limit(limit).Find(&out).Error
	return out, err
}

// ClaimCall makes this instance the owner of a call that another, gone,
// instance owned, if it is still in that status with that owner: of two
// instances recovering the same call, one claims it.
func (tx *Tx) ClaimCall(id string, status models.CallStatus, from string) error {
	return tx.changeOne(id, `UPDATE tool_calls SET owner = ?, updated_at = ? WHERE id = ? AND status = ? AND owner = ?`,
		tx.self, tx.now, id, status, from)
}

// LeaseRun makes this instance the one stepping a run until now+d, if no
// other live instance holds it; it says whether it does.
func (s *Store) LeaseRun(ctx context.Context, runID string, d time.Duration) (bool, error) {
	var ok bool
	err := s.Write(ctx, func(tx *Tx) error {
		until := tx.now.Add(d)
		n, err := tx.exec(`UPDATE runs SET worker = ?, lease_until = ? WHERE id = ?
			AND (worker = ? OR worker = '' OR worker IS NULL OR lease_until IS NULL OR lease_until < ?)`,
			s.self, until, runID, s.self, tx.now)
		ok = n == 1
		return err
	})
	return ok, err
}

// ReleaseRun gives up this instance's lease on a run.
func (s *Store) ReleaseRun(ctx context.Context, runID string) error {
	return s.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE runs SET worker = '', lease_until = NULL WHERE id = ? AND worker = ?`, runID, s.self)
		return err
	})
}

// RecordInForce records which policy and tools this instance decides with
// (its instances row, made if need be, and an instance.versions audit
// event, in one unit): at start and after every reload, so what each
// instance ran is known afterwards and a mismatch between live instances
// can be shown. why says what led to it ("start", "reload", …).
func (s *Store) RecordInForce(ctx context.Context, host, policyVersion, toolsVersion, why string) error {
	return s.Write(ctx, func(tx *Tx) error {
		n, err := tx.exec(`UPDATE instances SET heartbeat_at = ?, policy_version = ?, tools_version = ?, policy_error = '' WHERE id = ?`,
			tx.now, policyVersion, toolsVersion, s.self)
		if err != nil {
			return fmt.Errorf("record versions: %w", err)
		}
		if n == 0 {
			if _, err := tx.exec(`INSERT INTO instances (id, host, started_at, heartbeat_at, policy_version, tools_version) VALUES (?, ?, ?, ?, ?, ?)`,
				s.self, host, tx.now, tx.now, policyVersion, toolsVersion); err != nil {
				return fmt.Errorf("record versions: %w", err)
			}
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventInstanceInForce, Subject: s.self,
			Payload: models.InstanceInForcePayload{Host: host, PolicyVersion: policyVersion, ToolsVersion: toolsVersion, Why: why}})
	})
}

// RecordPolicyNotLoaded records that this instance could not load the
// policy version in force and decides nothing (its instances row says why,
// /policy shows it) with a policy.not_loaded audit event, in one unit.
func (s *Store) RecordPolicyNotLoaded(ctx context.Context, host string, v *models.PolicyVersion, cause string) error {
	return s.Write(ctx, func(tx *Tx) error {
		n, err := tx.exec(`UPDATE instances SET heartbeat_at = ?, policy_version = ?, policy_error = ? WHERE id = ?`,
			tx.now, v.Hash, cause, s.self)
		if err != nil {
			return fmt.Errorf("record the policy not loaded: %w", err)
		}
		if n == 0 {
			if _, err := tx.exec(`INSERT INTO instances (id, host, started_at, heartbeat_at, policy_version, policy_error) VALUES (?, ?, ?, ?, ?, ?)`,
				s.self, host, tx.now, tx.now, v.Hash, cause); err != nil {
				return fmt.Errorf("record the policy not loaded: %w", err)
			}
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventPolicyNotLoaded, Subject: s.self,
			Payload: models.PolicyNotLoadedPayload{Error: cause, Hash: v.Hash, VersionID: v.ID}})
	})
}

// InstanceRow reads one instance's row (this one's: Instance()).
func (s *Store) InstanceRow(ctx context.Context, id string) (*models.Instance, error) {
	var in models.Instance
	if err := s.db.WithContext(ctx).Take(&in, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &in, nil
}

// LatestEventAbout is the newest audit event whose subject is subject.
func (s *Store) LatestEventAbout(ctx context.Context, subject string) (*models.AuditEvent, error) {
	var e models.AuditEvent
	if err := s.db.WithContext(ctx).Where("subject = ?", subject).Order("at DESC, chain DESC, seq DESC").Take(&e).Error; err != nil {
		return nil, notFound(err)
	}
	return &e, nil
}
