package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/backoffice"
)

// signInConfig is how staff sign in: passwords, and the company's OpenID
// Provider.
type signInConfig struct {
	Issuer, ClientID, ClientSecret string
	Name                           string
	Groups                         listFlag
	GroupsClaim                    string
	Passwords                      string
	SignWithPasskey                bool
}

func (cfg *config) signInFlags(fs *flag.FlagSet) {
	s := &cfg.SignIn
	fs.StringVar(&s.Issuer, "oidc-issuer", "", "the company's OpenID Provider (https://…): staff sign in with it, at /login/oidc")
	fs.StringVar(&s.ClientID, "oidc-client-id", "", "Countersign's client id at the OpenID Provider (its redirect URI: <public-url>/login/oidc/callback)")
	fs.StringVar(&s.ClientSecret, "oidc-client-secret", "", "Countersign's client secret at the OpenID Provider (better: COUNTERSIGN_OIDC_CLIENT_SECRET)")
	fs.StringVar(&s.Name, "oidc-name", "", "the provider's name on the sign-in button (default: the issuer's host)")
	fs.Var(&s.Groups, "oidc-group", "GROUP=ROLE: members of the provider's group GROUP sign in with ROLE (repeatable; the first that matches wins)")
	fs.StringVar(&s.GroupsClaim, "oidc-groups-claim", "groups", "the ID token's claim that lists the person's groups")
	fs.BoolVar(&s.SignWithPasskey, "sign-with-passkey", false, "every admin's approval of a policy version or a staff change is signed with their passkey (the API cannot approve them then)")
	fs.StringVar(&s.Passwords, "password-sign-in", "on", "off: staff sign in through the OpenID Provider only (countersign user add and token create stay on the host)")
}

// ssoConfig checks the sign-in flags and gives web's configuration.
func (cfg *config) ssoConfig(public string) (*backoffice.SSOConfig, bool, error) {
	s := cfg.SignIn
	noPasswords := false
	switch strings.ToLower(s.Passwords) {
	case "on", "":
	case "off":
		noPasswords = true
	default:
		return nil, false, fmt.Errorf("--password-sign-in %q: on or off", s.Passwords)
	}
	if s.Issuer == "" {
		if noPasswords {
			return nil, false, fmt.Errorf("--password-sign-in off needs --oidc-issuer: nobody could sign in")
		}
		if s.ClientID != "" || len(s.Groups) > 0 {
			return nil, false, fmt.Errorf("--oidc-client-id and --oidc-group need --oidc-issuer")
		}
		return nil, false, nil
	}
	if !strings.HasPrefix(s.Issuer, "https://") && !strings.HasPrefix(s.Issuer, "http://127.0.0.1") && !strings.HasPrefix(s.Issuer, "http://localhost") {
		return nil, false, fmt.Errorf("--oidc-issuer %q: the provider must be reached over https (http only on this machine)", s.Issuer)
	}
	if s.ClientID == "" || s.ClientSecret == "" {
		return nil, false, fmt.Errorf("--oidc-issuer needs --oidc-client-id and --oidc-client-secret (or COUNTERSIGN_OIDC_CLIENT_SECRET)")
	}
	out := &backoffice.SSOConfig{Issuer: strings.TrimRight(s.Issuer, "/"), ClientID: s.ClientID, ClientSecret: s.ClientSecret, Name: s.Name,
		GroupsClaim: s.GroupsClaim, RedirectURL: public + views.PathLoginOIDCCallback}
	for _, g := range s.Groups {
		m, err := accounts.ParseGroupRole(g)
		if err != nil {
			return nil, false, fmt.Errorf("--oidc-group %w", err)
		}
		out.Groups = append(out.Groups, m)
	}
	return out, noPasswords, nil
}
