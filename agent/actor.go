package agent

import "github.com/countersign/countersign/models"

// Actor is who does something: a staff member, or the system itself.
type Actor struct {
	ID   string
	Name string
	Role models.StaffRole
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
