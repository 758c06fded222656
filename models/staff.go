package models

import (
	"errors"
	"time"
)

// Staff is a back-office account.
type Staff struct {
	ID           string    `gorm:"primaryKey;size:40"`
	Email        string    `gorm:"size:200;uniqueIndex"`
	Name         string    `gorm:"size:200"`
	Role         StaffRole `gorm:"size:16"`
	PasswordHash string    `gorm:"size:200"`
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Origin is how the account came to be: OriginHost, OriginChange,
	// OriginDemo, OriginSSO; "" for an account made before staff changes
	// were countersigned.
	Origin string `gorm:"size:16;default:''"`
	// ToldAt is when every admin was told of an account made on the host
	// (nil: not yet; the core's sweep tells them).
	ToldAt *time.Time
	// SSOSubject is the identity provider's issuer and subject ("issuer
	// sub") of an account that signs in through single sign-on.
	SSOSubject string `gorm:"size:300;default:''"`
}

// StaffLink links an account to its address on a channel people answer
// through (a Slack user id): a decision made there from that address acts
// as the account. One address is one account's at most, per channel.
type StaffLink struct {
	StaffID   string `gorm:"primaryKey;size:40"`
	Channel   string `gorm:"primaryKey;size:40;uniqueIndex:idx_staff_links_address,priority:1"`
	Address   string `gorm:"size:200;not null;uniqueIndex:idx_staff_links_address,priority:2"`
	CreatedAt time.Time
}

// Session is a signed-in browser. Its id is stored as a SHA-256 of the
// cookie value, so a copy of the database opens no session.
type Session struct {
	IDHash     string `gorm:"primaryKey;size:64"`
	StaffID    string `gorm:"size:40;index;not null"`
	Staff      *Staff `gorm:"constraint:OnDelete:CASCADE"`
	CSRFToken  string `gorm:"size:64"`
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// APIToken lets a program act as a staff member on the staff API.
type APIToken struct {
	ID         string `gorm:"primaryKey;size:40"`
	StaffID    string `gorm:"size:40;index;not null"`
	Staff      *Staff `gorm:"constraint:OnDelete:CASCADE"`
	TokenHash  string `gorm:"size:64;uniqueIndex"`
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// ErrEmailTaken is returned when an email already has an account.
var ErrEmailTaken = errors.New("email taken")

// ErrLinkTaken is returned when an address on a channel is already linked
// to another account.
var ErrLinkTaken = errors.New("address taken")
