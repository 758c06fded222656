package main

import (
	"io"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
)

// The sign-in flags: what a careful operator gets wrong is refused with
// words; a good set gives web its provider, with the secret from the
// environment.
func TestSignInFlags(t *testing.T) {
	parseSignIn := func(args ...string) (*config, error) {
		fs, c := newFlagSet("serve", io.Discard)
		c.signInFlags(fs)
		return c, parse(fs, args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--password-sign-in", "off"}, "needs --oidc-issuer"},
		{[]string{"--password-sign-in", "maybe"}, "on or off"},
		{[]string{"--oidc-issuer", "http://login.example.com", "--oidc-client-id", "cs", "--oidc-client-secret", "s"}, "over https"},
		{[]string{"--oidc-issuer", "https://login.example.com"}, "needs --oidc-client-id and --oidc-client-secret"},
		{[]string{"--oidc-issuer", "https://login.example.com", "--oidc-client-id", "cs", "--oidc-client-secret", "s", "--oidc-group", "admins"}, "GROUP=ROLE"},
		{[]string{"--oidc-group", "a=admin"}, "need --oidc-issuer"},
	} {
		c, err := parseSignIn(tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.ssoConfig("https://cs.example"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("COUNTERSIGN_OIDC_CLIENT_SECRET", "from-the-environment")
	c, err := parseSignIn("--oidc-issuer", "https://login.example.com/", "--oidc-client-id", "cs", "--oidc-group", "cs-admins=admin",
		"--oidc-group", "support=approver", "--password-sign-in", "off")
	if err != nil {
		t.Fatal(err)
	}
	sso, noPasswords, err := c.ssoConfig("https://cs.example")
	if err != nil || !noPasswords || sso.ClientSecret != "from-the-environment" || sso.Issuer != "https://login.example.com" ||
		sso.RedirectURL != "https://cs.example/login/oidc/callback" || len(sso.Groups) != 2 || sso.Groups[1].Role != models.Approver {
		t.Fatalf("%+v %v %v", sso, noPasswords, err)
	}
}
