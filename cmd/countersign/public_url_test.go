package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// With --public-url, the start banner and `user enroll-link` (given it in
// the environment, as serve was) give the address people open Countersign
// at, where single sign-on and passkeys work, not the address it listens
// on.
func TestTheBannerAndEnrollLinkGiveThePublicURL(t *testing.T) {
	db := storetest.DSN(t)
	out := &lockedBuffer{}
	cfg := config{Addr: "127.0.0.1:0", DB: db}
	cfg.Reach.PublicURL = "http://localhost:8080/"
	app := serveApp(t, cfg, out)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "back office"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no banner: %q", out.String())
		}
	}
	if banner := out.String(); !strings.Contains(banner, "Countersign is running at http://localhost:8080 ") ||
		!strings.Contains(banner, "back office: http://localhost:8080/login") || !strings.Contains(banner, "listening on http://"+app.Addr()) {
		t.Fatalf("the banner:\n%s", banner)
	}
	runCmdIn(t, "correct horse battery staple\n", "user", "add", "--email", "ines@x.test", "--role", "admin", "--name", "Ines", "--db", db)
	t.Setenv("COUNTERSIGN_PUBLIC_URL", "http://localhost:8080")
	if link, _ := runCmd(t, "user", "enroll-link", "--email", "ines@x.test", "--db", db); !strings.HasPrefix(link, "http://localhost:8080/enroll/") {
		t.Fatalf("the enroll link: %q", link)
	}
}

// The demo's four accounts, made by its seed on the host, are marked so on
// /staff, as the README says; /policy names the demo's policy in words.
func TestTheDemoAccountsAreMarkedMadeOnTheHost(t *testing.T) {
	out := &lockedBuffer{}
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true}, out)
	password := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[2] == "ada@demo.countersign" {
			password = f[4]
		}
	}
	if password == "" {
		t.Fatalf("no password for the demo admin in:\n%s", out.String())
	}
	jar, _ := cookiejar.New(nil)
	ada := &http.Client{Jar: jar}
	base := "http://" + app.Addr()
	if res, err := ada.PostForm(base+"/login", url.Values{"email": {"ada@demo.countersign"}, "password": {password}}); err != nil || res.StatusCode != 200 {
		t.Fatalf("sign in: %v %v", res, err)
	}
	res, err := ada.Get(base + "/staff")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if n := strings.Count(string(raw), `data-testid="made-on-host"`); n != 4 {
		t.Fatalf("%d of the 4 demo accounts are marked made on the host", n)
	}
	// /policy says in words where the policy in force came from.
	if res, err = ada.Get(base + "/policy"); err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(raw), "From the built-in demo shop policy.") {
		i := strings.Index(string(raw), "From ")
		t.Fatalf("/policy says: %.80s", string(raw)[max(i, 0):])
	}
}
