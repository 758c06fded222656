package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/alexedwards/argon2id"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// An enrollment link lets one person set their own password: made when an
// account is added or its credentials are reset, it works once, for
// models.EnrollmentTTL, and only its newest link works. It reaches its
// owner by email when the deployment sends email (Mailer); otherwise
// someone on the host prints one (countersign user enroll-link). No admin
// ever sees it: it is in no response and no audit event.

// Mailer sends a person their enrollment link, in the transaction that
// made it (agent/outbox queues the email).
type Mailer interface {
	// SendsEmail reports whether email reaches people at all.
	SendsEmail() bool
	// QueueEnrollment queues the email with the link to the person.
	QueueEnrollment(tx *storage.Tx, to *models.Staff, link, purpose string, expires time.Time) error
	// Address is the public address of a path of the back office.
	Address(path string) string
}

// EnrollPath is the back-office path of an enrollment link's token.
func EnrollPath(token string) string { return "/enroll/" + token }

// issueEnrollment makes a link for the account and, when email reaches
// people, sends it; otherwise the link is forgotten at once and the host
// prints a new one when asked.
func (a *Service) issueEnrollment(tx *storage.Tx, st *models.Staff, purpose, change, actor string) error {
	token, hash := randomToken("enr_")
	e := &models.Enrollment{ID: models.NewID("enr"), StaffID: st.ID, TokenHash: hash, Purpose: purpose, ChangeID: change, CreatedBy: actor}
	sent := ""
	if a.Mailer != nil && a.Mailer.SendsEmail() {
		sent = "email"
	}
	if err := tx.AddEnrollment(e, sent); err != nil {
		return err
	}
	if sent == "" {
		return nil
	}
	return a.Mailer.QueueEnrollment(tx, st, a.Mailer.Address(EnrollPath(token)), purpose, e.ExpiresAt)
}

// EnrollLink makes a new enrollment link for an account, on the host, and
// returns its path (the earlier links stop working). The account must not
// be disabled.
func (a *Service) EnrollLink(ctx context.Context, email string) (path string, expires time.Time, err error) {
	st, err := a.store.StaffByEmail(ctx, email)
	if errors.Is(err, models.ErrNotFound) {
		return "", time.Time{}, fault.Errorf(fault.NotFound, "no account has the email %s", email)
	}
	if err != nil {
		return "", time.Time{}, fault.Wrap(err, "could not read the account")
	}
	if st.Disabled {
		return "", time.Time{}, fault.Errorf(fault.Forbidden, "%s is disabled: an admin proposes enabling it first", st.Email)
	}
	token, hash := randomToken("enr_")
	purpose := "reset"
	if st.PasswordHash == "" {
		purpose = "new"
	}
	e := &models.Enrollment{ID: models.NewID("enr"), StaffID: st.ID, TokenHash: hash, Purpose: purpose, CreatedBy: HostActor.String()}
	if err := a.store.Write(ctx, func(tx *storage.Tx) error { return tx.AddEnrollment(e, "host") }); err != nil {
		return "", time.Time{}, fault.Wrap(err, "could not make the link")
	}
	return EnrollPath(token), e.ExpiresAt, nil
}

// Enrollment finds the account an enrollment link is for, while the link
// still works.
func (a *Service) Enrollment(ctx context.Context, token string) (*models.Enrollment, *models.Staff, error) {
	e, st, err := a.store.Enrollment(ctx, models.HashToken(token))
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil, fault.Errorf(fault.NotFound, "this link does not work: it was used already, it expired (links work for %d hours), or a newer one was made. Ask an admin for a new one", int(models.EnrollmentTTL.Hours()))
	}
	if err != nil {
		return nil, nil, unavailable(err)
	}
	if st.Disabled {
		return nil, nil, fault.Errorf(fault.Forbidden, "this account is disabled; ask an admin")
	}
	return e, st, nil
}

// Enroll spends a link: the person sets their password. The link works
// once; the account is returned to start a session.
func (a *Service) Enroll(ctx context.Context, token, password, again string) (*models.Staff, error) {
	if _, _, err := a.Enrollment(ctx, token); err != nil {
		return nil, err
	}
	switch {
	case len([]rune(password)) < MinPasswordLength:
		return nil, fault.Errorf(fault.Invalid, "the password must be at least %d characters", MinPasswordLength)
	case len(password) > 1024:
		return nil, fault.Errorf(fault.Invalid, "the password is over 1024 bytes")
	case password != again:
		return nil, fault.Errorf(fault.Invalid, "the two passwords differ")
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
	st, err := a.store.UseEnrollment(ctx, models.HashToken(token), hash)
	if errors.Is(err, models.ErrNotFound) {
		return nil, fault.Errorf(fault.NotFound, "this link was used a moment ago, or expired; ask an admin for a new one")
	}
	if err != nil {
		return nil, fault.Wrap(err, "could not set the password")
	}
	return st, nil
}
