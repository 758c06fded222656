package storage

import (
	"context"
	"errors"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The single sign-on group mapping, one per deployment.

// ssoGroupsKey keeps, among the values the instances share, which single
// sign-on groups give which roles.
const ssoGroupsKey = "sso-groups"

// SSOGroups is the deployment's group mapping (one GROUP=ROLE a line);
// ok is false when none is kept yet.
func (s *Store) SSOGroups(ctx context.Context) (mapping string, ok bool, err error) {
	var got models.SharedSecret
	err = s.db.WithContext(ctx).Take(&got, "name = ?", ssoGroupsKey).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	return got.Value, err == nil, err
}

// SettleSSOGroups keeps mapping as the deployment's when none is kept yet
// (the first instance's --oidc-group, audited as done on its host) and
// returns the one kept.
func (s *Store) SettleSSOGroups(ctx context.Context, mapping, host string) (string, error) {
	var kept string
	err := s.Write(ctx, func(tx *Tx) error {
		// Instances starting together settle it one at a time.
		if err := tx.Serialize(ssoGroupsKey); err != nil {
			return err
		}
		var got models.SharedSecret
		err := tx.db.Take(&got, "name = ?", ssoGroupsKey).Error
		if err == nil {
			kept = got.Value
			return nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		kept = mapping
		return tx.setSSOGroups(mapping, "host:"+host)
	})
	return kept, err
}

// SetSSOGroups changes the deployment's group mapping inside the unit (a
// countersigned staff change taking effect).
func (tx *Tx) SetSSOGroups(mapping, actor string) error { return tx.setSSOGroups(mapping, actor) }

func (tx *Tx) setSSOGroups(mapping, actor string) error {
	row := models.SharedSecret{Name: ssoGroupsKey, Value: mapping, CreatedAt: tx.now}
	if err := tx.db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).Create(&row).Error; err != nil {
		return err
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffGroupsSet, Subject: ssoGroupsKey, Payload: models.StaffGroupsPayload{Mapping: mapping}})
}
