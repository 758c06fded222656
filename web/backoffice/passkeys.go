package backoffice

import (
	"net"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Passkeys on the back office (agent/accounts/passkeys.go): a person adds
// and removes theirs on /account, signs in with one, and signs decisions
// whose rule asks for it. The scripts are static/passkey.js.

// relyingParty is the back office as the browser sees it: the host name
// passkeys belong to, and the origin the ceremonies run on.
func (s *Office) passkeyRP(r *http.Request) accounts.RP {
	if s.cfg.PublicURL != "" {
		if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Host != "" {
			return accounts.RP{ID: u.Hostname(), Origin: u.Scheme + "://" + u.Host}
		}
	}
	scheme := "http"
	if s.kit.OverTLS(r) {
		scheme = "https"
	}
	host := s.kit.PublicHost(r)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	return accounts.RP{ID: name, Origin: scheme + "://" + host}
}

// ceremonyJSON answers a script: the options and the state, or an error
// in words.
func ceremonyJSON(c echo.Context, options any, state string, err error) error {
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return c.JSON(doorkit.HTTPStatus(fault.CodeOf(err)), map[string]any{"error": map[string]string{"code": string(fault.CodeOf(err)), "message": sentence(fault.Message(err))}})
	}
	return c.JSON(http.StatusOK, map[string]any{"options": options, "state": state})
}

func (s *Office) accountPage(c echo.Context) error {
	st := currentStaff(c).staff
	keys, err := s.core.Store.Passkeys(c.Request().Context(), st.ID)
	if err != nil {
		return err
	}
	v := views.AccountView{Name: st.Name, Email: st.Email, Role: string(st.Role),
		Flash: map[string]string{"added": "Passkey added.", "removed": "Passkey removed."}[c.QueryParam("done")]}
	for _, k := range keys {
		row := views.PasskeyRow{ID: k.ID, Name: k.Name, Added: clock(k.CreatedAt)}
		if k.LastUsedAt != nil {
			row.LastUsed = clock(*k.LastUsedAt)
		}
		v.Passkeys = append(v.Passkeys, row)
	}
	return render(c, http.StatusOK, views.Account(v))
}

func (s *Office) accountFail(c echo.Context, err error) error {
	if fault.CodeOf(err) == fault.Internal {
		return err
	}
	st := currentStaff(c).staff
	return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.Account(views.AccountView{Name: st.Name, Email: st.Email, Role: string(st.Role),
		FlashError: sentence(fault.Message(err))}))
}

func (s *Office) passkeyRegisterBegin(c echo.Context) error {
	opts, state, err := s.core.Accounts.BeginRegistration(c.Request().Context(), currentStaff(c).staff, s.passkeyRP(c.Request()))
	return ceremonyJSON(c, opts, state, err)
}

func (s *Office) passkeyRegister(c echo.Context) error {
	err := s.core.Accounts.FinishRegistration(c.Request().Context(), currentStaff(c).staff, c.FormValue("state"), []byte(c.FormValue("credential")), c.FormValue("name"))
	if err != nil {
		return s.accountFail(c, err)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathAccount, "done=added"))
}

func (s *Office) passkeyRemove(c echo.Context) error {
	if err := s.core.Accounts.RemovePasskey(c.Request().Context(), currentStaff(c).staff, c.Param("id")); err != nil {
		return s.accountFail(c, err)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathAccount, "done=removed"))
}

// sameOrigin refuses a post without a session from another site (the
// sign-in's rule).
func (s *Office) sameOrigin(c echo.Context) error {
	if o := c.Request().Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); o == "null" || err != nil || u.Host != s.kit.PublicHost(c.Request()) {
			return fault.Errorf(fault.Forbidden, "sign in from Countersign's own page")
		}
	}
	return nil
}

func (s *Office) loginPasskeyBegin(c echo.Context) error {
	if err := s.sameOrigin(c); err != nil {
		return ceremonyJSON(c, nil, "", err)
	}
	if !s.loginIP.Allow(c.RealIP()) {
		return ceremonyJSON(c, nil, "", fault.Errorf(fault.RateLimited, "too many attempts; wait a minute and try again"))
	}
	opts, state, err := s.core.Accounts.BeginSignIn(c.Request().Context(), s.passkeyRP(c.Request()))
	return ceremonyJSON(c, opts, state, err)
}

func (s *Office) loginPasskey(c echo.Context) error {
	if err := s.sameOrigin(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	st, err := s.core.Accounts.FinishSignIn(ctx, c.FormValue("state"), []byte(c.FormValue("credential")))
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.Login(s.loginView(c.FormValue("next"), sentence(fault.Message(err)))))
	}
	if err := s.signIn(c, st); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(c.FormValue("next")))
}

// decisionOf is what a decision form decides: the call, the arguments it
// would run with (the edited ones for an edit), the verdict, and the
// summary the page shows of them.
func (s *Office) decisionOf(c echo.Context, verdict string) (accounts.Decision, error) {
	id := c.Param("id")
	call, err := s.core.Store.ToolCall(c.Request().Context(), id)
	if err != nil {
		return accounts.Decision{}, fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
	}
	tool, ok := s.core.Gate.Tools().Get(call.Tool)
	if !ok {
		return accounts.Decision{}, fault.Errorf(fault.Conflict, "the tool %s is no longer offered", call.Tool)
	}
	args := []byte(call.Args)
	if c.FormValue("edit") == "1" {
		edited, errs := argsFromForm(tool.Schema, c.FormValue)
		if len(errs) > 0 {
			return accounts.Decision{}, fault.Errorf(fault.Invalid, "fix the highlighted fields first")
		}
		args = edited
	}
	n, err := tool.Normalize(args)
	if err != nil {
		return accounts.Decision{}, fault.Errorf(fault.Invalid, "the arguments do not fit the tool: %s", tools.Truncate(err.Error(), 300))
	}
	return accounts.Decision{CallID: call.ID, ArgsHash: n.Hash, Verdict: verdict, Summary: tool.Summarize(string(n.JSON))}, nil
}

// beginSigning is a passkey prompt over what decide says is being
// decided: the WebAuthn challenge commits to it.
func (s *Office) beginSigning(decide func(echo.Context) (accounts.Decision, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		d, err := decide(c)
		if err != nil {
			return ceremonyJSON(c, nil, "", err)
		}
		opts, state, err := s.core.Accounts.BeginSigning(c.Request().Context(), currentStaff(c).staff, s.passkeyRP(c.Request()), d)
		return ceremonyJSON(c, opts, state, err)
	}
}

// signature checks the passkey signature a form carries (nil: none)
// against what decide says the form decides.
func (s *Office) signature(c echo.Context, decide func(echo.Context) (accounts.Decision, error)) (*models.PasskeySignature, error) {
	state := c.FormValue("passkey_state")
	if state == "" {
		return nil, nil
	}
	d, err := decide(c)
	if err != nil {
		return nil, err
	}
	return s.core.Accounts.VerifySigning(c.Request().Context(), currentStaff(c).staff, state, []byte(c.FormValue("passkey_assertion")), d)
}

// actionDecision is what an action's form asks a passkey prompt for:
// approve, or reject when the form says so.
func (s *Office) actionDecision(c echo.Context) (accounts.Decision, error) {
	if c.FormValue("verdict") == "reject" {
		return s.decisionOf(c, "reject")
	}
	return s.decisionOf(c, "approve")
}

// verdictOn is what a decision posted to the approve or reject route
// decides: that route's verdict, whatever the form says.
func (s *Office) verdictOn(verdict string) func(echo.Context) (accounts.Decision, error) {
	return func(c echo.Context) (accounts.Decision, error) { return s.decisionOf(c, verdict) }
}
