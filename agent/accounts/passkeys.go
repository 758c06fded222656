package accounts

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
)

// Passkeys (WebAuthn, go-webauthn): a person registers them on /account,
// signs in with one, and signs decisions with one. A decision's challenge
// is not random alone: it is the SHA-256 of the call, the arguments decided
// on, the verdict, the summary the page showed and a fresh nonce
// (DecisionChallenge), so the authenticator's signature is over exactly
// what was decided, and anyone with the person's public key can check it
// later (audit verify).

// RP is the relying party a ceremony runs for: the back office's host name
// and origin, as the browser sees them.
type RP struct {
	ID, Origin string
}

func (rp RP) webauthn() (*webauthn.WebAuthn, error) {
	return webauthn.New(&webauthn.Config{RPDisplayName: "Countersign", RPID: rp.ID, RPOrigins: []string{rp.Origin}})
}

// passkeyUser is an account as go-webauthn sees it.
type passkeyUser struct {
	st    *models.Staff
	creds []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return []byte(u.st.ID) }
func (u passkeyUser) WebAuthnName() string                       { return u.st.Email }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.st.Name }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func (a *Service) passkeyUser(ctx context.Context, st *models.Staff, rpID string) (passkeyUser, []models.Passkey, error) {
	keys, err := a.store.Passkeys(ctx, st.ID)
	if err != nil {
		return passkeyUser{}, nil, err
	}
	u := passkeyUser{st: st}
	for _, k := range keys {
		if k.RPID != rpID {
			continue
		}
		var c webauthn.Credential
		if err := json.Unmarshal([]byte(k.Credential), &c); err == nil {
			u.creds = append(u.creds, c)
		}
	}
	return u, keys, nil
}

// sealed is ceremony state handed to the browser and back, signed so it
// cannot be changed: the session data, whose it is, and until when.
type sealed struct {
	Session webauthn.SessionData `json:"s"`
	Staff   string               `json:"u,omitempty"`
	Call    string               `json:"c,omitempty"`
	Nonce   string               `json:"n,omitempty"`
	RP      RP                   `json:"rp"`
}

func (a *Service) stateKey(ctx context.Context) ([]byte, error) {
	k, err := a.store.Secret(ctx, "webauthn-state")
	if err != nil {
		return nil, err
	}
	return hex.DecodeString(k)
}

func (a *Service) seal(ctx context.Context, s sealed) (string, error) {
	key, err := a.stateKey(ctx)
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(s)
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

func (a *Service) open(ctx context.Context, state string) (sealed, error) {
	var s sealed
	bodyText, sig, ok := strings.Cut(state, ".")
	body, err1 := base64.RawURLEncoding.DecodeString(bodyText)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	key, err := a.stateKey(ctx)
	if err != nil {
		return s, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(got, mac.Sum(nil)) || json.Unmarshal(body, &s) != nil {
		return s, fault.Errorf(fault.Invalid, "the passkey ceremony's state does not check out; try again")
	}
	if a.store.Now().After(s.Session.Expires) {
		return s, fault.Errorf(fault.Invalid, "the passkey prompt waited too long; try again")
	}
	return s, nil
}

const ceremonyTTL = 5 * time.Minute

// BeginRegistration starts adding a passkey to an account.
func (a *Service) BeginRegistration(ctx context.Context, st *models.Staff, rp RP) (*protocol.CredentialCreation, string, error) {
	w, err := rp.webauthn()
	if err != nil {
		return nil, "", fault.Errorf(fault.Invalid, "passkeys need a host name: %v", err)
	}
	u, _, err := a.passkeyUser(ctx, st, rp.ID)
	if err != nil {
		return nil, "", err
	}
	creation, session, err := w.BeginRegistration(u, webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(webauthn.Credentials(u.creds).CredentialDescriptors()),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementRequired, UserVerification: protocol.VerificationRequired}))
	if err != nil {
		return nil, "", fault.Wrap(err, "could not start the passkey registration")
	}
	session.Expires = a.store.Now().Add(ceremonyTTL)
	state, err := a.seal(ctx, sealed{Session: *session, Staff: st.ID, RP: rp})
	return creation, state, err
}

// FinishRegistration checks the browser's answer and keeps the passkey.
func (a *Service) FinishRegistration(ctx context.Context, st *models.Staff, state string, response []byte, name string) error {
	k, err := a.registered(ctx, st, state, response, name)
	if err != nil {
		return err
	}
	return a.store.AddPasskey(ctx, k, st.Actor().String())
}

// BeginEnrollPasskey starts registering a passkey through an enrollment
// link, instead of setting a password.
func (a *Service) BeginEnrollPasskey(ctx context.Context, token string, rp RP) (*protocol.CredentialCreation, string, error) {
	_, st, err := a.Enrollment(ctx, token)
	if err != nil {
		return nil, "", err
	}
	return a.BeginRegistration(ctx, st, rp)
}

// EnrollPasskey spends an enrollment link on a passkey: the link works
// once, and the passkey is kept with it.
func (a *Service) EnrollPasskey(ctx context.Context, token, state string, response []byte, name string) (*models.Staff, error) {
	_, st, err := a.Enrollment(ctx, token)
	if err != nil {
		return nil, err
	}
	k, err := a.registered(ctx, st, state, response, name)
	if err != nil {
		return nil, err
	}
	who, err := a.store.UseEnrollmentForPasskey(ctx, models.HashToken(token), st.ID, k)
	if errors.Is(err, models.ErrNotFound) {
		return nil, fault.Errorf(fault.NotFound, "this link was used a moment ago, or expired; ask an admin for a new one")
	}
	if err != nil {
		return nil, fault.Wrap(err, "could not keep the passkey")
	}
	return who, nil
}

// registered checks a registration's answer and gives the passkey to keep.
func (a *Service) registered(ctx context.Context, st *models.Staff, state string, response []byte, name string) (*models.Passkey, error) {
	s, err := a.open(ctx, state)
	if err != nil {
		return nil, err
	}
	if s.Staff != st.ID {
		return nil, fault.Errorf(fault.Forbidden, "this passkey prompt was started by another account")
	}
	w, err := s.RP.webauthn()
	if err != nil {
		return nil, err
	}
	u, _, err := a.passkeyUser(ctx, st, s.RP.ID)
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "the passkey's answer does not parse: %v", err)
	}
	cred, err := w.CreateCredential(u, s.Session, parsed)
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "the passkey was not accepted: %s", webauthnWords(err))
	}
	body, _ := json.Marshal(cred)
	name = tools.Truncate(strings.TrimSpace(name), 100)
	if name == "" {
		name = "Passkey"
	}
	return &models.Passkey{ID: base64.RawURLEncoding.EncodeToString(cred.ID), StaffID: st.ID, Name: name, RPID: s.RP.ID,
		Credential: string(body)}, nil
}

// RemovePasskey removes one of the account's passkeys; the last way to
// sign in cannot be removed.
func (a *Service) RemovePasskey(ctx context.Context, st *models.Staff, id string) error {
	err := a.store.RemovePasskey(ctx, st.ID, id, st.PasswordHash != "" || st.SSOSubject != "", st.Actor().String())
	switch {
	case errors.Is(err, models.ErrNotFound):
		return fault.Errorf(fault.NotFound, "no such passkey")
	case errors.Is(err, models.ErrConflict):
		return fault.Errorf(fault.Conflict, "this is your last way to sign in: add another passkey or set a password before removing it")
	}
	return err
}

// BeginSignIn starts a passkey sign-in (no email asked: the passkey says
// whose it is).
func (a *Service) BeginSignIn(ctx context.Context, rp RP) (*protocol.CredentialAssertion, string, error) {
	w, err := rp.webauthn()
	if err != nil {
		return nil, "", fault.Errorf(fault.Invalid, "passkeys need a host name: %v", err)
	}
	assertion, session, err := w.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, "", fault.Wrap(err, "could not start the passkey sign-in")
	}
	session.Expires = a.store.Now().Add(ceremonyTTL)
	state, err := a.seal(ctx, sealed{Session: *session, RP: rp})
	return assertion, state, err
}

// FinishSignIn checks a passkey sign-in and returns whose it is.
func (a *Service) FinishSignIn(ctx context.Context, state string, response []byte) (*models.Staff, error) {
	s, err := a.open(ctx, state)
	if err != nil {
		return nil, err
	}
	w, err := s.RP.webauthn()
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "the passkey's answer does not parse: %v", err)
	}
	var who *models.Staff
	handler := func(rawID, userHandle []byte) (webauthn.User, error) {
		st, err := a.store.StaffByID(ctx, string(userHandle))
		if err != nil {
			return nil, err
		}
		u, _, err := a.passkeyUser(ctx, st, s.RP.ID)
		who = st
		return u, err
	}
	cred, err := w.ValidateDiscoverableLogin(handler, s.Session, parsed)
	if err != nil || who == nil {
		return nil, fault.Errorf(fault.Unauthorized, "the passkey did not sign you in: %s", webauthnWords(err))
	}
	if who.Disabled {
		return nil, fault.Errorf(fault.Forbidden, "this account is disabled; ask an admin")
	}
	if err := a.used(ctx, cred); err != nil {
		return nil, err
	}
	return who, nil
}

// used keeps a credential's new signature counter; a counter that went
// back means a cloned authenticator, and the passkey is refused.
func (a *Service) used(ctx context.Context, cred *webauthn.Credential) error {
	if cred.Authenticator.CloneWarning {
		return fault.Errorf(fault.Forbidden, "this passkey's signature counter went back: it may have been copied. Remove it and add a new one")
	}
	body, _ := json.Marshal(cred)
	return a.store.PasskeyUsed(ctx, base64.RawURLEncoding.EncodeToString(cred.ID), string(body))
}

// Decision is what a person is about to sign: the call, the arguments it
// would run with (normalized), the verdict and the summary the page shows.
type Decision struct {
	CallID, ArgsHash, Verdict, Summary string
}

// BeginSigning starts the passkey prompt for a decision.
func (a *Service) BeginSigning(ctx context.Context, st *models.Staff, rp RP, d Decision) (*protocol.CredentialAssertion, string, error) {
	w, err := rp.webauthn()
	if err != nil {
		return nil, "", fault.Errorf(fault.Invalid, "passkeys need a host name: %v", err)
	}
	u, _, err := a.passkeyUser(ctx, st, rp.ID)
	if err != nil {
		return nil, "", err
	}
	if len(u.creds) == 0 {
		return nil, "", fault.Errorf(fault.Forbidden, "this decision is signed with a passkey, and you have none here: add one on your account page first")
	}
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	nonce := base64.RawURLEncoding.EncodeToString(nb[:])
	challenge := models.DecisionChallenge(d.CallID, d.ArgsHash, d.Verdict, models.SummaryDigest(d.Summary), nonce)
	assertion, session, err := w.BeginLogin(u, webauthn.WithChallenge(challenge), webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, "", fault.Wrap(err, "could not start the passkey prompt")
	}
	session.Expires = a.store.Now().Add(ceremonyTTL)
	state, err := a.seal(ctx, sealed{Session: *session, Staff: st.ID, Call: d.CallID, Nonce: nonce, RP: rp})
	return assertion, state, err
}

// VerifySigning checks a passkey signature over a decision: made by this
// person's passkey, for this call, over exactly these arguments, verdict
// and summary. It returns the signature to keep with the approval.
func (a *Service) VerifySigning(ctx context.Context, st *models.Staff, state string, response []byte, d Decision) (*models.PasskeySignature, error) {
	s, err := a.open(ctx, state)
	if err != nil {
		return nil, err
	}
	if s.Staff != st.ID || s.Call != d.CallID {
		return nil, fault.Errorf(fault.Forbidden, "this passkey signature was made for another person or another action")
	}
	w, err := s.RP.webauthn()
	if err != nil {
		return nil, err
	}
	u, _, err := a.passkeyUser(ctx, st, s.RP.ID)
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "the passkey's answer does not parse: %v", err)
	}
	digest := models.SummaryDigest(d.Summary)
	// The challenge the server expects is made again from what is being
	// decided now: a signature over other arguments, another verdict or
	// another summary does not match it.
	s.Session.Challenge = base64.RawURLEncoding.EncodeToString(models.DecisionChallenge(d.CallID, d.ArgsHash, d.Verdict, digest, s.Nonce))
	cred, err := w.ValidateLogin(u, s.Session, parsed)
	if err != nil {
		return nil, fault.Errorf(fault.Forbidden, "the passkey signature is not over this decision (%s): the arguments, the verdict or the page changed since you signed; sign again", webauthnWords(err))
	}
	if err := a.used(ctx, cred); err != nil {
		return nil, err
	}
	return &models.PasskeySignature{CredentialID: base64.RawURLEncoding.EncodeToString(cred.ID), RPID: s.RP.ID, Origin: s.RP.Origin,
		CallID: d.CallID, ArgsHash: d.ArgsHash, Verdict: d.Verdict, SummaryDigest: digest, Nonce: s.Nonce, Assertion: string(response)}, nil
}

// CheckSignature checks a kept signature again, as `audit verify` does:
// the challenge made from the record, and the signature against the
// person's registered public key.
func CheckSignature(sig models.PasskeySignature, key models.Passkey, callID, argsHash, verdict string) error {
	if sig.CallID != callID || sig.ArgsHash != argsHash || sig.Verdict != verdict {
		return fmt.Errorf("it signs call %s, arguments %.12s…, %s; the record says call %s, arguments %.12s…, %s",
			sig.CallID, sig.ArgsHash, sig.Verdict, callID, argsHash, verdict)
	}
	var cred webauthn.Credential
	if err := json.Unmarshal([]byte(key.Credential), &cred); err != nil {
		return fmt.Errorf("the passkey record does not decode: %v", err)
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(sig.Assertion))
	if err != nil {
		return fmt.Errorf("the assertion does not parse: %v", err)
	}
	challenge := base64.RawURLEncoding.EncodeToString(models.DecisionChallenge(callID, argsHash, verdict, sig.SummaryDigest, sig.Nonce))
	if err := parsed.Verify(challenge, sig.RPID, "", []string{sig.Origin}, nil, nil, protocol.TopOriginExplicitVerificationMode, false, true, true,
		cred.PublicKey, protocol.SignaturePolicy{}); err != nil {
		return fmt.Errorf("the signature does not verify: %s", webauthnWords(err))
	}
	return nil
}

// webauthnWords is what go-webauthn says went wrong, in one line.
func webauthnWords(err error) string {
	if err == nil {
		return "unknown passkey"
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != "" {
		return pe.Details
	}
	return err.Error()
}
