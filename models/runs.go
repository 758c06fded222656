package models

import (
	"errors"
)

// Turn roles.
const (
	RoleCustomer  = "customer"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
)

// ErrDuplicate is returned by AppendTurn when a turn with the same marker
// is already in the run.
var ErrDuplicate = errors.New("duplicate")
