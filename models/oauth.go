package models

import (
	"time"
)

// OAuthClient is an MCP client that registered with Countersign's
// authorization server. It may get tokens only once an admin authorized it
// as an outside agent (AgentID), and none after it was revoked.
type OAuthClient struct {
	// ID is the client_id: one Countersign gave (csc_…), or the https URL
	// of the client's metadata document.
	ID           string `gorm:"primaryKey;size:500"`
	Name         string `gorm:"size:200"`
	RedirectURIs string `gorm:"type:text"` // JSON: []string
	ClientURI    string `gorm:"size:500"`
	CreatedAt    time.Time
	AgentID      string `gorm:"size:40;default:''"`
	AuthorizedBy string `gorm:"size:64;default:''"` // the staff id of the admin who authorized it
	AuthorizedAt *time.Time
	RevokedAt    *time.Time
}

// OAuthRecord is one of the authorization server's records: an
// authorization request ("request"), a code pointing at one ("code"), an
// access token ("access") or a refresh token ("refresh"). Data is the
// server's own JSON; a record past ExpiresAt is gone.
type OAuthRecord struct {
	Kind      string    `gorm:"primaryKey;size:16"`
	ID        string    `gorm:"primaryKey;size:128"`
	ClientID  string    `gorm:"size:64;index"`
	Data      string    `gorm:"type:text"`
	ExpiresAt time.Time `gorm:"index"`
	CreatedAt time.Time
	// Family is the sign-in (authorization request) a token descends from.
	Family string `gorm:"size:64;index;default:''"`
}

// TableName is oauth_clients (gorm would say o_auth_clients).
func (OAuthClient) TableName() string { return "oauth_clients" }

// TableName is oauth_records.
func (OAuthRecord) TableName() string { return "oauth_records" }

// UnauthorizedClientLifetime is how long a client no admin authorized is
// kept: then it is deleted (with its requests), as it would have to ask
// again anyway. Its registration stays in the audit log.
const UnauthorizedClientLifetime = 24 * time.Hour
