package models

import "time"

// Who may sign is itself countersigned: adding an account, raising its
// role, enabling it again and resetting its credentials are proposed by one
// admin and take effect when other admins approve (as many people as a
// policy change needs, the proposer counted). Lowering a role and disabling
// take power away and take effect at once.

// StaffChangeKind is what a staff change does.
type StaffChangeKind string

// The kinds of staff change.
const (
	ChangeAdd    StaffChangeKind = "add"    // a new account, with a role
	ChangeRole   StaffChangeKind = "role"   // another role for an account
	ChangeEnable StaffChangeKind = "enable" // a disabled account signs in again
	ChangeReset  StaffChangeKind = "reset"  // the account's password and passkeys are cleared; its owner enrolls again
	ChangeGroups StaffChangeKind = "groups" // the single sign-on groups that give roles (Mapping)
)

// StaffChangeKinds lists every kind of staff change.
var StaffChangeKinds = []StaffChangeKind{ChangeAdd, ChangeRole, ChangeEnable, ChangeReset, ChangeGroups}

// Valid reports whether k is a known kind.
func (k StaffChangeKind) Valid() bool { return oneOf(k, StaffChangeKinds) }

// StaffChangeStatus is where a staff change is.
type StaffChangeStatus string

// Staff change statuses: proposed waits for admins; done took effect;
// rejected never will.
const (
	ChangeProposed StaffChangeStatus = "proposed"
	ChangeDone     StaffChangeStatus = "done"
	ChangeRejected StaffChangeStatus = "rejected"
)

// StaffChange is one proposed change of who may sign.
type StaffChange struct {
	ID   string          `gorm:"primaryKey;size:40"`
	Kind StaffChangeKind `gorm:"size:16"`
	// StaffID is the account concerned ("" for an add until it is done).
	StaffID string            `gorm:"size:40;index"`
	Email   string            `gorm:"size:200;index"`
	Name    string            `gorm:"size:200"`
	Role    StaffRole         `gorm:"size:16"` // an add's role, or the new role
	Status  StaffChangeStatus `gorm:"size:16;index"`
	// ProposedBy is the admin who proposed it (a staff id) and their name.
	ProposedBy   string `gorm:"size:40"`
	ProposerName string `gorm:"size:200"`
	// PeopleNeeded is how many people sign it, the proposer counted, as the
	// deployment said when it was proposed.
	PeopleNeeded int
	Reason       string `gorm:"type:text"` // a rejection's
	EndedBy      string `gorm:"size:200"`  // who made it done or rejected it
	CreatedAt    time.Time
	EndedAt      *time.Time
	// Mapping is a groups change's new mapping: one GROUP=ROLE a line.
	Mapping string `gorm:"type:text;default:''"`
}

// StaffChangeSignature is one admin's approval of a staff change.
type StaffChangeSignature struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	ChangeID  string `gorm:"size:40;uniqueIndex:idx_staff_change_signatures_once,priority:1;not null"`
	StaffID   string `gorm:"size:40;uniqueIndex:idx_staff_change_signatures_once,priority:2"`
	StaffName string `gorm:"size:200"`
	CreatedAt time.Time
	// Passkey is the admin's passkey signature over it (PasskeySignature
	// as JSON), "" when the deployment asks for none.
	Passkey string `gorm:"type:text;default:''"`
}

// Subject is what a passkey signature on the change names, and Digest what
// it signs of it: its kind, email and role.
func (ch *StaffChange) Subject() string { return "staff-change:" + ch.ID }

// Digest is the SHA-256 (hex) of what the change does.
func (ch *StaffChange) Digest() string {
	return SummaryDigest(string(ch.Kind) + "\n" + ch.Email + "\n" + string(ch.Role) + "\n" + ch.Mapping)
}

// How an account came to be (Staff.Origin).
const (
	OriginHost   = "host"   // countersign user add, on the host: the first admins, break-glass
	OriginChange = "change" // a countersigned staff change
	OriginDemo   = "demo"   // the demo's seed
	OriginSSO    = "sso"    // the company's single sign-on
)

// EnrollmentTTL is how long an enrollment link works: three days, so a
// link sent on a Friday still works on Monday.
const EnrollmentTTL = 72 * time.Hour

// Enrollment is a one-time link that lets one person set their own
// password (or register a passkey): made when an account is added or its
// credentials are reset. Only a hash of the link's token is kept.
type Enrollment struct {
	ID        string `gorm:"primaryKey;size:40"`
	StaffID   string `gorm:"size:40;index;not null"`
	TokenHash string `gorm:"size:64;uniqueIndex"`
	// Purpose is "new" (a new account) or "reset".
	Purpose   string `gorm:"size:16"`
	ChangeID  string `gorm:"size:40"`
	CreatedBy string `gorm:"size:200"` // the actor: the change's, or "host"
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}
