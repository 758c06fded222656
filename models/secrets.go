package models

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// SharedSecret is a secret the instances on one database share without
// anyone having given it: made at random by the first that asks.
type SharedSecret struct {
	Name      string `gorm:"primaryKey;size:64"`
	Value     string `gorm:"type:text;not null"`
	CreatedAt time.Time
}

// Secret returns the shared secret called name, making it (32 random
// bytes, hex) when no instance has yet. Every instance gets the same.
func (s *Store) Secret(ctx context.Context, name string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	var value string
	err := s.Write(ctx, func(tx *Tx) error {
		made := SharedSecret{Name: name, Value: hex.EncodeToString(b[:]), CreatedAt: tx.now}
		if err := tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&made).Error; err != nil {
			return err
		}
		var got SharedSecret
		if err := tx.db.Take(&got, "name = ?", name).Error; err != nil {
			return err
		}
		value = got.Value
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("the shared secret %s: %w", name, err)
	}
	return value, nil
}
