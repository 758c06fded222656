package models

import "time"

// The payloads of what happens to people and agents: staff accounts,
// their changes, credentials and sessions; agents and OAuth clients.

// StaffCreatedPayload is the payload of staff.created. Via is how the
// account came to be (Staff.Origin); Change the staff change that made it.
type StaffCreatedPayload struct {
	Change string    `json:"change,omitempty"`
	Email  string    `json:"email"`
	Name   string    `json:"name"`
	Role   StaffRole `json:"role"`
	Via    string    `json:"via,omitempty"`
}

// StaffChangePayload is the payload of staff.change_proposed and
// staff.change_done (the subject is the change).
type StaffChangePayload struct {
	Account      string          `json:"account,omitempty"` // the account concerned, once there is one
	Email        string          `json:"email"`
	Kind         StaffChangeKind `json:"kind"`
	PeopleNeeded int             `json:"people_needed"`
	Role         StaffRole       `json:"role,omitempty"`
}

// StaffChangeSignedPayload is the payload of staff.change_signed.
type StaffChangeSignedPayload struct {
	Signed int `json:"signed"` // people who signed so far, the proposer counted
}

// StaffChangeRejectedPayload is the payload of staff.change_rejected.
type StaffChangeRejectedPayload struct {
	Reason string `json:"reason"`
}

// StaffPasskeyPayload is the payload of staff.passkey_added and
// staff.passkey_removed (the subject is the account).
type StaffPasskeyPayload struct {
	Name    string `json:"name,omitempty"`
	Passkey string `json:"passkey"` // the credential's id
}

// StaffGroupsPayload is the payload of staff.groups_set: the single
// sign-on group mapping now in force, one GROUP=ROLE a line.
type StaffGroupsPayload struct {
	Mapping string `json:"mapping"`
}

// StaffEnrollPayload is the payload of staff.enroll_link and staff.enrolled
// (the subject is the account): never the link itself.
type StaffEnrollPayload struct {
	Change     string     `json:"change,omitempty"`
	Credential string     `json:"credential,omitempty"` // what the person set: "password"
	Expires    *time.Time `json:"expires,omitempty"`
	Purpose    string     `json:"purpose"`
	Sent       string     `json:"sent,omitempty"` // "email", or "host" when printed on the host
}

// StaffUpdatedPayload is the payload of staff.updated: what changed, and
// only that.
type StaffUpdatedPayload struct {
	Disabled *bool `json:"disabled,omitempty"`
	// Link is how a channel's link is written since migration 00022;
	// SlackUser is the Slack link as events before it wrote it.
	Link      *LinkChange        `json:"link,omitempty"`
	Role      *FromTo[StaffRole] `json:"role,omitempty"`
	SlackUser *FromTo[string]    `json:"slack_user,omitempty"`
}

// LinkChange is an account's address on a channel, before and after.
type LinkChange struct {
	Channel string `json:"channel"`
	FromTo[string]
}

// StaffSessionPayload is the payload of staff.signed_in and
// staff.signed_out (the subject says whose).
type StaffSessionPayload struct{}

// StaffTokenPayload is the payload of staff.token_created and
// staff.token_revoked.
type StaffTokenPayload struct {
	TokenID string `json:"token_id"`
}

// StaffTokensRevokedPayload is the payload of staff.tokens_revoked.
type StaffTokensRevokedPayload struct {
	Count int64 `json:"count"`
}

// AgentCreatedPayload is the payload of agent.created.
type AgentCreatedPayload struct {
	Name string `json:"name"`
}

// AgentRevokedPayload is the payload of agent.revoked.
type AgentRevokedPayload struct{}

// OAuthClientRegisteredPayload is the payload of oauth.client_registered.
type OAuthClientRegisteredPayload struct {
	Name         string `json:"name"`
	RedirectURIs string `json:"redirect_uris"`
}

// OAuthClientAuthorizedPayload is the payload of oauth.client_authorized:
// which outside agent the client acts as.
type OAuthClientAuthorizedPayload struct {
	AgentID   string `json:"agent_id"`
	AgentName string `json:"agent_name"`
}

// OAuthClientRevokedPayload is the payload of oauth.client_revoked.
type OAuthClientRevokedPayload struct{}
