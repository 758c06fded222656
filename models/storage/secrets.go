package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// Secret returns the shared secret called name, making it (32 random
// bytes, hex) when no instance has yet. Every instance gets the same.
func (s *Store) Secret(ctx context.Context, name string) (string, error) {
	return s.SecretMade(ctx, name, func() (string, error) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return hex.EncodeToString(b[:]), nil
	})
}

// SecretMade is Secret with the secret made by make (a signing key, say)
// when there is none yet; of instances making one at once, the first to
// store it wins and all get that one.
func (s *Store) SecretMade(ctx context.Context, name string, make func() (string, error)) (string, error) {
	var got models.SharedSecret
	if err := s.db.WithContext(ctx).Take(&got, "name = ?", name).Error; err == nil {
		return got.Value, nil
	}
	value, err := make()
	if err != nil {
		return "", fmt.Errorf("make the shared secret %s: %w", name, err)
	}
	err = s.Write(ctx, func(tx *Tx) error {
		made := models.SharedSecret{Name: name, Value: value, CreatedAt: tx.now}
		if err := tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&made).Error; err != nil {
			return err
		}
		return tx.db.Take(&got, "name = ?", name).Error
	})
	if err != nil {
		return "", fmt.Errorf("the shared secret %s: %w", name, err)
	}
	return got.Value, nil
}
