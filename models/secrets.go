package models

import (
	"time"
)

// SharedSecret is a secret the instances on one database share without
// anyone having given it: made at random by the first that asks.
type SharedSecret struct {
	Name      string `gorm:"primaryKey;size:64"`
	Value     string `gorm:"type:text;not null"`
	CreatedAt time.Time
}
