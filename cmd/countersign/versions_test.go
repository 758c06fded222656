package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// Two instances started with different policy files on one database no
// longer decide differently: both run the version in force (the first
// one's), the second's file waits as a proposal until admins countersign
// it, /healthz and /policy say both run one version, and no warning shows.
// A reload that fails is shown on /policy, not only logged.
func TestInstancesWithDifferentPoliciesAreShown(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	bin := buildCountersign(t)
	dsn := storetest.DSN(t)
	dir := t.TempDir()
	strict, lax := filepath.Join(dir, "strict.yaml"), filepath.Join(dir, "lax.yaml")
	os.WriteFile(strict, []byte("defaults:\n  high_write: {decision: needs_approval, reason: a person decides}\n"), 0o600)
	os.WriteFile(lax, []byte("defaults:\n  high_write: {decision: allow, reason: anything goes}\n"), 0o600)
	a := startInstance(t, bin, "--db", dsn, "--demo", "--policy", strict)
	b := startInstance(t, bin, "--db", dsn, "--demo", "--policy", lax)
	out, code := runCmdIn(t, "a long enough password\n", "user", "add", "--email", "root@x.test", "--name", "Root", "--role", "admin", "--db", dsn)
	if code != 0 {
		t.Fatal(out)
	}
	health := func(inst *instance) map[string]string {
		t.Helper()
		res, err := http.Get(inst.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var h map[string]string
		json.NewDecoder(res.Body).Decode(&h)
		return h
	}
	ha, hb := health(a), health(b)
	if ha["policy_version"] != hb["policy_version"] || ha["instance"] == hb["instance"] || ha["versions_differ"] != "" {
		t.Fatalf("healthz: %v / %v", ha, hb)
	}
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var proposed *models.PolicyVersion
	for deadline := time.Now().Add(10 * time.Second); proposed == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		vs, err := store.PolicyVersions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range vs {
			if vs[i].Status == models.PolicyProposed && strings.Contains(vs[i].Source, lax) {
				proposed = &vs[i]
			}
		}
	}
	if in, err := store.PolicyInForce(context.Background()); proposed == nil || err != nil || in.Hash != ha["policy_version"] || in.Hash == proposed.Hash {
		t.Fatalf("the second file is not waiting as a proposal: %+v %+v %v", proposed, in, err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if res, err := browser.PostForm(a.url+"/login", url.Values{"email": {"root@x.test"}, "password": {"a long enough password"}}); err != nil || res.StatusCode != 200 {
		t.Fatalf("sign in: %v %v", res, err)
	}
	page := func(path string) string {
		t.Helper()
		res, err := browser.Get(a.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return string(raw)
	}
	if p := page("/queue"); strings.Contains(p, `data-testid="versions-differ"`) {
		t.Error("/queue warns that the instances differ")
	}
	pol := page("/policy")
	if !strings.Contains(pol, ha["instance"]) || !strings.Contains(pol, hb["instance"]) || strings.Contains(pol, "<strong> differs</strong>") {
		i := strings.Index(pol, `id="instances"`)
		t.Fatalf("/policy does not list both instances on one version: %.2000s", pol[max(i, 0):])
	}

	// A reload that fails is on /policy and in the audit log.
	os.WriteFile(strict, []byte("defaults: [not, a, policy\n"), 0o600)
	a.cmd.Process.Signal(syscall.SIGHUP)
	for i := 0; ; i++ {
		if strings.Contains(page("/policy"), `data-testid="reload-failed"`) {
			break
		}
		if i > 100 {
			t.Fatal("/policy does not say the reload failed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
