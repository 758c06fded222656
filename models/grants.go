package models

import (
	"time"
)

// Grant is a standing permission a supervisor gave while approving an
// action: later calls of the same tool for the same customer that would
// wait for one person's approval run without asking, until the grant is
// used up, expires or is revoked. The gate consults it after the policy
// (agent.Gate.Call); it never turns a denial into anything else.
type Grant struct {
	ID         string `gorm:"primaryKey;size:40"`
	Tool       string `gorm:"size:100;index:idx_grants_lookup,priority:2"`
	CustomerID string `gorm:"size:64;index:idx_grants_lookup,priority:1"`
	// CustomerName is the customer's name when the grant was given, to show.
	CustomerName string `gorm:"size:200"`
	// AgentID is the outside agent whose call it was given on ("" for
	// Countersign's own conversations): it covers only calls that come the
	// same way, so a grant given on a signed-in widget customer's call is
	// not used by an agent that merely names that customer.
	AgentID string `gorm:"size:40;default:''"`
	// MaxUses bounds how many calls it allows (0: no count bound);
	// MaxCents (below) the sum of their amounts. ExpiresAt always bounds it.
	MaxUses   int64
	Uses      int64
	ExpiresAt time.Time `gorm:"index"`
	// Role is the granting person's role: it covers only calls that role
	// could have approved alone.
	Role StaffRole `gorm:"size:16"`
	// CreatedBy is who gave it ("staff:<id> (<name>)" as the audit names
	// them), SourceCallID the action they approved while giving it.
	CreatedByID  string `gorm:"size:40"`
	CreatedBy    string `gorm:"size:200"`
	SourceCallID string `gorm:"size:40"`
	Note         string `gorm:"type:text"`
	CreatedAt    time.Time
	LastUsedAt   *time.Time
	RevokedAt    *time.Time
	RevokedBy    string `gorm:"size:200;default:''"`
	RevokeReason string `gorm:"type:text"`
	// MaxCents bounds the sum of the amounts of the calls it allows, in the
	// tool's Amount argument (0: no amount bound); UsedCents is what they
	// came to. (Last: migration 00009/00011 added them to the table's end.)
	MaxCents  Cents `gorm:"not null;default:0"`
	UsedCents Cents `gorm:"not null;default:0"`
}

// GrantState says whether a grant still allows calls, and if not, why.
type GrantState string

// Grant states, derived from the record and the clock.
const (
	GrantActive    GrantState = "active"
	GrantExhausted GrantState = "used up"
	GrantExpired   GrantState = "expired"
	GrantRevoked   GrantState = "revoked"
)

// StateAt is the grant's state at the given time.
func (g *Grant) StateAt(now time.Time) GrantState {
	switch {
	case g.RevokedAt != nil:
		return GrantRevoked
	case !now.Before(g.ExpiresAt):
		return GrantExpired
	case g.MaxUses > 0 && g.Uses >= g.MaxUses,
		g.MaxCents > 0 && g.UsedCents >= g.MaxCents:
		return GrantExhausted
	}
	return GrantActive
}
