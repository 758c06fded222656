package agent

// Role is a staff member's role.
type Role string

// Staff roles. Auditors read everything and decide nothing; admins manage
// accounts and may decide as a supervisor would.
const (
	RoleApprover   Role = "approver"
	RoleSupervisor Role = "supervisor"
	RoleAuditor    Role = "auditor"
	RoleAdmin      Role = "admin"
)

// Roles lists every role.
var Roles = []Role{RoleApprover, RoleSupervisor, RoleAuditor, RoleAdmin}

func (r Role) authority() int {
	switch r {
	case RoleApprover:
		return 1
	case RoleSupervisor:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	for _, x := range Roles {
		if r == x {
			return true
		}
	}
	return false
}

// CanDecide reports whether the role may approve or reject actions at all.
func (r Role) CanDecide() bool { return r.authority() > 0 }

// AtLeast reports whether r has the authority of min (an empty min is met
// by every deciding role).
func (r Role) AtLeast(min Role) bool {
	if min == "" {
		return r.CanDecide()
	}
	return r.authority() >= min.authority()
}

// Actor is who does something: a staff member, or the system itself.
type Actor struct {
	ID   string
	Name string
	Role Role
}

// String is how the actor appears in the audit log.
func (a Actor) String() string {
	if a.ID == "" {
		return "system"
	}
	return "staff:" + a.ID + " (" + a.Name + ")"
}

// System is the actor of sweeps and recoveries.
var System = Actor{}
