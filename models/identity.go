package models

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// HashToken is how secrets handed out (run tokens, session ids, API tokens)
// are stored and looked up: their SHA-256, never the secret itself.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Actor is who does something: a staff member, or the system itself.
type Actor struct {
	ID   string
	Name string
	Role StaffRole
}

// String is how the actor appears in the audit log.
func (a Actor) String() string {
	if a.ID == "" {
		return "system"
	}
	return "staff:" + a.ID + " (" + a.Name + ")"
}

// ActorName is the person's name in an actor as the audit log writes it
// ("staff:stf_x (Sue)" gives "Sue"); other actors are given as they are.
func ActorName(actor string) string {
	if _, name, ok := strings.Cut(actor, " ("); ok && strings.HasSuffix(name, ")") {
		return strings.TrimSuffix(name, ")")
	}
	return actor
}

// SystemActor is the actor of sweeps and recoveries.
var SystemActor = Actor{}

// Actor is how a staff member appears in the audit log and to the gate.
func (st *Staff) Actor() Actor {
	return Actor{ID: st.ID, Name: st.Name, Role: st.Role}
}
