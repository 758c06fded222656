package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Single sign-on: the company's identity provider says who a person is and
// which groups they are in; GroupRoles says which role each group gives.
// A person's role follows their groups at every sign-in; a person in no
// mapped group is refused, and their open sessions end.

// GroupRole maps a group of the identity provider to a role.
type GroupRole struct {
	Group string
	Role  models.StaffRole
}

// ParseGroupRole reads GROUP=ROLE.
func ParseGroupRole(s string) (GroupRole, error) {
	g, r, ok := strings.Cut(s, "=")
	g, r = strings.TrimSpace(g), strings.TrimSpace(r)
	if !ok || g == "" || !models.StaffRole(r).Valid() {
		return GroupRole{}, fmt.Errorf("%q: want GROUP=ROLE, the role approver, supervisor, auditor or admin", s)
	}
	return GroupRole{Group: g, Role: models.StaffRole(r)}, nil
}

// RoleFor is the role the first mapping that names one of the groups gives
// (mappings are tried in the order given), or "".
func RoleFor(mapping []GroupRole, groups []string) models.StaffRole {
	for _, m := range mapping {
		for _, g := range groups {
			if g == m.Group {
				return m.Role
			}
		}
	}
	return ""
}

// Identity is what the identity provider said of a person, from a verified
// ID token.
type Identity struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	Name            string
	Groups          []string
}

// SSOSignIn finds or makes the account of a person the identity provider
// vouched for, with the role their groups give now.
func (a *Service) SSOSignIn(ctx context.Context, id Identity, mapping []GroupRole) (*models.Staff, error) {
	subject := id.Issuer + " " + id.Subject
	role := RoleFor(mapping, id.Groups)
	email := strings.ToLower(strings.TrimSpace(id.Email))
	var st *models.Staff
	unmapped := false
	err := a.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		st, err = tx.StaffBySSOSubject(subject)
		if errors.Is(err, models.ErrNotFound) && email != "" && id.EmailVerified {
			// An account the host or a staff change made for the same
			// verified email signs in through the provider from now on.
			st, err = tx.StaffByEmail(email)
			if err == nil && st.SSOSubject != "" {
				return fault.Errorf(fault.Forbidden, "%s is linked to another identity at the identity provider", email)
			}
		}
		switch {
		case errors.Is(err, models.ErrNotFound):
			st = nil
		case err != nil:
			return err
		}
		if role == "" {
			// Refused; the sessions an earlier mapping opened end, and
			// that is committed.
			unmapped = true
			if st != nil {
				return tx.EndSessions(st.ID)
			}
			return nil
		}
		if st == nil {
			if email == "" || !id.EmailVerified {
				return fault.Errorf(fault.Forbidden, "the identity provider gave no verified email address for you: Countersign needs one")
			}
			name := strings.TrimSpace(id.Name)
			if name == "" {
				name = strings.Split(email, "@")[0]
			}
			st = &models.Staff{ID: models.NewID("stf"), Email: email, Name: tools.Truncate(name, 200), Role: role, Origin: models.OriginSSO, SSOSubject: subject}
			return tx.CreateStaff(st, "sso:"+id.Issuer, "")
		}
		if st.Disabled {
			return fault.Errorf(fault.Forbidden, "this account is disabled; ask an admin")
		}
		return tx.SetSSO(st, subject, role, "sso:"+id.Issuer)
	})
	if err != nil {
		if fault.CodeOf(err) != fault.Internal {
			return nil, err
		}
		return nil, fault.Wrap(err, "could not record the sign-in")
	}
	if unmapped {
		return nil, errNoMappedGroup(id.Groups)
	}
	return st, nil
}

// errNoMappedGroup refuses a person whose groups give no role.
func errNoMappedGroup(groups []string) error {
	if len(groups) == 0 {
		return fault.Errorf(fault.Forbidden, "your account at the identity provider is in no group, so it has no role in Countersign: ask an admin to add you to a group Countersign maps")
	}
	return fault.Errorf(fault.Forbidden, "none of your groups at the identity provider (%s) gives a role in Countersign: ask an admin to add you to a group Countersign maps", strings.Join(groups, ", "))
}

// FormatGroups is a mapping as the deployment keeps it: one GROUP=ROLE a
// line, in order.
func FormatGroups(mapping []GroupRole) string {
	lines := make([]string, len(mapping))
	for i, m := range mapping {
		lines[i] = m.Group + "=" + string(m.Role)
	}
	return strings.Join(lines, "\n")
}

// ParseGroups reads a mapping, one GROUP=ROLE a line (blank lines skipped).
func ParseGroups(lines []string) ([]GroupRole, error) {
	var out []GroupRole
	for _, l := range lines {
		for _, part := range strings.Split(l, "\n") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			m, err := ParseGroupRole(part)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("a mapping needs at least one GROUP=ROLE")
	}
	return out, nil
}

// SettleGroups keeps the instance's --oidc-group mapping as the
// deployment's when none is kept yet. An instance whose flags disagree
// with the one kept refuses to start: the mapping is changed by a
// countersigned staff change, not by one instance's flags.
func (a *Service) SettleGroups(ctx context.Context, flags []GroupRole, host string) error {
	if len(flags) == 0 {
		if _, ok, err := a.store.SSOGroups(ctx); err != nil || ok {
			return err
		}
		return fmt.Errorf("--oidc-issuer needs --oidc-group GROUP=ROLE the first time: a person's role comes from their groups")
	}
	want := FormatGroups(flags)
	kept, err := a.store.SettleSSOGroups(ctx, want, host)
	if err != nil {
		return fmt.Errorf("the single sign-on group mapping: %w", err)
	}
	if kept != want {
		return fmt.Errorf("--oidc-group disagrees with this deployment's group mapping, kept in the database (%s): start without --oidc-group, or propose the change on /staff, where another admin approves it", strings.ReplaceAll(kept, "\n", ", "))
	}
	return nil
}

// Groups is the deployment's group mapping (nil: none kept).
func (a *Service) Groups(ctx context.Context) ([]GroupRole, error) {
	text, ok, err := a.store.SSOGroups(ctx)
	if err != nil || !ok {
		return nil, err
	}
	return ParseGroups([]string{text})
}
