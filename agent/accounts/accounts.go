// Package accounts holds staff accounts: adding them with argon2id password
// hashes, signing in (a few hashes at a time), sessions with idle and
// absolute timeouts, API tokens, roles and disabling.
package accounts

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/alexedwards/argon2id"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// MinPasswordLength is the shortest password an account may have.
const MinPasswordLength = 12

// Service manages staff accounts, their sessions and API tokens.
type Service struct {
	store *storage.Store
	// IdleTimeout ends a session nobody used for that long; AbsoluteTimeout
	// ends every session that old.
	IdleTimeout     time.Duration
	AbsoluteTimeout time.Duration
	dummyHash       string
	// hashing lets a few password hashes run at once: each argon2id costs
	// 64 MiB, so a flood of sign-ins waits here instead of taking memory.
	hashing chan struct{}
	// Mailer sends enrollment links (nil: the host prints them).
	Mailer Mailer
	// SignWithPasskey asks every approval of a staff change for the
	// admin's passkey signature (--sign-with-passkey).
	SignWithPasskey bool
	// Revoked is told of an agent whose key was revoked here, with the
	// waiting actions cancelled with it (the core's bus: what the agent
	// holds open ends at once).
	Revoked func(agentID string, cancelled []string)
}

// MaxConcurrentHashes is how many password hashes run at once.
const MaxConcurrentHashes = 2

// New builds the accounts service.
func New(store *storage.Store) *Service {
	dummy, _ := argon2id.CreateHash("countersign-dummy-password", argon2id.DefaultParams)
	return &Service{store: store, IdleTimeout: 2 * time.Hour, AbsoluteTimeout: 12 * time.Hour, dummyHash: dummy,
		hashing: make(chan struct{}, MaxConcurrentHashes)}
}

// hashSlot waits for a turn to hash a password.
func (a *Service) hashSlot(ctx context.Context) (release func(), err error) {
	select {
	case a.hashing <- struct{}{}:
		return func() { <-a.hashing }, nil
	case <-ctx.Done():
		return nil, fault.Errorf(fault.Unauthorized, "the sign-in took too long; try again")
	}
}

// AddStaff creates an account with an argon2id password hash, on the host
// (countersign user add, the demo's seed): the first admins, and
// break-glass. The account is marked as made there, and every admin is
// told (agent/outbox). In the back office accounts are proposed (Propose).
func (a *Service) AddStaff(ctx context.Context, email, name string, role models.StaffRole, password string, by models.Actor) (*models.Staff, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	// Every problem at once, so a form is fixed in one go.
	var problems []string
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email {
		problems = append(problems, fmt.Sprintf("%q is not an email address", email))
	}
	if !role.Valid() {
		problems = append(problems, fmt.Sprintf("role %q: use approver, supervisor, auditor or admin", role))
	}
	if len([]rune(password)) < MinPasswordLength {
		problems = append(problems, fmt.Sprintf("the password must be at least %d characters", MinPasswordLength))
	}
	if len(problems) > 0 {
		return nil, fault.Errorf(fault.Invalid, "%s", strings.Join(problems, "; "))
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = strings.Split(email, "@")[0]
	}
	release, err := a.hashSlot(ctx)
	if err != nil {
		return nil, err
	}
	hash, err := argon2id.CreateHash(password, argon2id.DefaultParams)
	release()
	if err != nil {
		return nil, fault.Wrap(err, "could not hash the password")
	}
	origin := models.OriginHost
	if by.ID == "demo" {
		origin = models.OriginDemo
	}
	st := &models.Staff{ID: models.NewID("stf"), Email: email, Name: tools.Truncate(name, 200), Role: role, PasswordHash: hash, Origin: origin}
	if err := a.store.CreateStaff(ctx, st, by.String()); err != nil {
		if errors.Is(err, models.ErrEmailTaken) {
			return nil, fault.Errorf(fault.Conflict, "%s already has an account", email)
		}
		return nil, fault.Wrap(err, "could not create the account")
	}
	return st, nil
}

// Authenticate checks an email and password. Unknown emails cost the same
// hashing time as wrong passwords, so the answer leaks nothing.
func (a *Service) Authenticate(ctx context.Context, email, password string) (*models.Staff, error) {
	st, err := a.store.StaffByEmail(ctx, email)
	hash := a.dummyHash
	if err == nil && st.PasswordHash != "" {
		hash = st.PasswordHash
	}
	release, serr := a.hashSlot(ctx)
	if serr != nil {
		return nil, serr
	}
	ok, herr := argon2id.ComparePasswordAndHash(password, hash)
	release()
	if err != nil || herr != nil || !ok || st.PasswordHash == "" {
		return nil, fault.Errorf(fault.Unauthorized, "wrong email or password")
	}
	if st.Disabled {
		return nil, fault.Errorf(fault.Forbidden, "this account is disabled; ask an admin")
	}
	return st, nil
}

func randomToken(prefix string) (token, hash string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	token = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, models.HashToken(token)
}

// StartSession opens a session: 256 random bits in the cookie, a hash in
// the database, a fresh CSRF token.
func (a *Service) StartSession(ctx context.Context, st *models.Staff) (cookie string, err error) {
	cookie, hash := randomToken("")
	csrf, _ := randomToken("")
	sess := &models.Session{IDHash: hash, StaffID: st.ID, CSRFToken: csrf}
	if err := a.store.CreateSession(ctx, sess); err != nil {
		return "", fault.Wrap(err, "could not start the session")
	}
	return cookie, nil
}

// Session finds the live session of a cookie; expired sessions are ended.
func (a *Service) Session(ctx context.Context, cookie string) (*models.Session, *models.Staff, error) {
	hash := models.HashToken(cookie)
	sess, st, err := a.store.SessionWithStaff(ctx, hash)
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, nil, unavailable(err)
	}
	if err != nil {
		return nil, nil, fault.Errorf(fault.Unauthorized, "please sign in")
	}
	now := a.store.Now()
	if st.Disabled || now.Sub(sess.LastSeenAt) > a.IdleTimeout || now.Sub(sess.CreatedAt) > a.AbsoluteTimeout {
		_ = a.store.DeleteSession(ctx, hash, "system")
		return nil, nil, fault.Errorf(fault.Unauthorized, "your session has ended; please sign in again")
	}
	_ = a.store.TouchSession(ctx, hash, now)
	return sess, st, nil
}

// EndSession signs a session out for good.
func (a *Service) EndSession(ctx context.Context, cookie string, st *models.Staff) error {
	return a.store.DeleteSession(ctx, models.HashToken(cookie), st.Actor().String())
}

// CreateAPIToken makes a staff API token; only its hash is kept.
func (a *Service) CreateAPIToken(ctx context.Context, email string, by models.Actor) (string, error) {
	st, err := a.store.StaffByEmail(ctx, email)
	if err != nil {
		return "", fault.Errorf(fault.NotFound, "no account has the email %s", email)
	}
	if st.Disabled {
		return "", fault.Errorf(fault.Forbidden, "%s is disabled", email)
	}
	token, hash := randomToken("cst_")
	if err := a.store.CreateAPIToken(ctx, &models.APIToken{ID: models.NewID("tok"), StaffID: st.ID, TokenHash: hash}, by.String()); err != nil {
		return "", fault.Wrap(err, "could not create the token")
	}
	return token, nil
}

// RevokeAPIToken ends a staff API token at once (a leaked one, say) without
// touching the account or its other tokens; it returns the account's email.
func (a *Service) RevokeAPIToken(ctx context.Context, token string, by models.Actor) (string, error) {
	staffID, err := a.store.RevokeAPIToken(ctx, models.HashToken(strings.TrimSpace(token)), by.String())
	if errors.Is(err, models.ErrNotFound) {
		return "", fault.Errorf(fault.NotFound, "no such staff API token (already revoked, or never issued here)")
	}
	if err != nil {
		return "", fault.Wrap(err, "could not revoke the token")
	}
	st, err := a.store.StaffByID(ctx, staffID)
	if err != nil {
		return staffID, nil
	}
	return st.Email, nil
}

// RevokeStaffTokens ends every staff API token of an account (admins only),
// leaving the account and its sessions alone.
func (a *Service) RevokeStaffTokens(ctx context.Context, staffID string, by models.Actor) (int64, error) {
	if by.Role != models.Admin {
		return 0, fault.Errorf(fault.Forbidden, "only an admin can revoke another account's tokens")
	}
	if _, err := a.store.StaffByID(ctx, staffID); err != nil {
		return 0, fault.Errorf(fault.NotFound, "no such account")
	}
	n, err := a.store.RevokeStaffTokens(ctx, staffID, by.String())
	if err != nil {
		return 0, fault.Wrap(err, "could not revoke the tokens")
	}
	return n, nil
}

// unavailable is a lookup that failed because the database did not answer:
// the key or session may well be good, so it is not called invalid (a
// client told 401 would throw away a good key); 503 says try again.
func unavailable(err error) error {
	return &fault.Error{Code: fault.Unavailable, Message: "Countersign cannot reach its database just now; try again in a few seconds", Err: err}
}

// StaffForToken finds who a staff API token belongs to.
func (a *Service) StaffForToken(ctx context.Context, token string) (*models.Staff, error) {
	st, err := a.store.StaffByTokenHash(ctx, models.HashToken(token))
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, unavailable(err)
	}
	if err != nil || st.Disabled {
		return nil, fault.Errorf(fault.Unauthorized, "the staff API token is not valid")
	}
	return st, nil
}

// SetDisabled disables an account at once: its sessions, API tokens and
// enrollment links end, and approvals it gave to actions still waiting stop
// counting. Enabling it again is a staff change (Propose).
func (a *Service) SetDisabled(ctx context.Context, staffID string, disabled bool, by models.Actor) error {
	if by.Role != models.Admin {
		return fault.Errorf(fault.Forbidden, "only an admin can disable accounts")
	}
	if !disabled {
		return fault.Errorf(fault.Forbidden, "enabling an account is countersigned: propose it, and another admin approves")
	}
	if staffID == by.ID {
		return fault.Errorf(fault.Invalid, "you cannot disable your own account")
	}
	return a.update(ctx, staffID, nil, &disabled, by)
}

func (a *Service) update(ctx context.Context, id string, role *models.StaffRole, disabled *bool, by models.Actor) error {
	if err := a.store.UpdateStaff(ctx, id, role, disabled, by.String()); err != nil {
		if errors.Is(err, models.ErrNotFound) {
			return fault.Errorf(fault.NotFound, "no such account")
		}
		return fault.Wrap(err, "could not update the account")
	}
	return nil
}

// Link links an account to its address on a channel ("" unlinks it): a
// decision made there from that address acts as the account. check is the
// channel's own (outbox.Link.Check).
func (a *Service) Link(ctx context.Context, staffID, channel, address string, check func(string) (string, error), by models.Actor) error {
	if by.Role != models.Admin {
		return fault.Errorf(fault.Forbidden, "only an admin can link people's addresses on %s to accounts", channel)
	}
	address = strings.TrimSpace(address)
	if address != "" {
		var err error
		if address, err = check(address); err != nil {
			return fault.Errorf(fault.Invalid, "%s", err.Error())
		}
	}
	switch err := a.store.LinkStaff(ctx, staffID, channel, address, by.String()); {
	case err == nil:
		return nil
	case errors.Is(err, models.ErrNotFound):
		return fault.Errorf(fault.NotFound, "no such account")
	case errors.Is(err, models.ErrLinkTaken):
		return fault.Errorf(fault.Conflict, "%s on %s is already linked to another account", address, channel)
	default:
		return fault.Wrap(err, "could not link the address")
	}
}
