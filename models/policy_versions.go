package models

import (
	"time"
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
	// Passkey is the admin's passkey signature over it (PasskeySignature
	// as JSON), "" when the deployment asks for none.
	Passkey string `gorm:"type:text;default:''"`
}
