package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// On /policy an admin proposes a version by editing it; a syntax error is
// shown by line; the author cannot approve their own; other roles cannot
// propose or approve; forms need their CSRF token; another admin's
// approval, carrying the replay they were shown, puts it in force; the
// diff shows what changed.
func TestPolicyVersionPages(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@shop.test", "Ada")
	a.staff(models.Admin, "bob@shop.test", "Bob")
	a.staff(models.Supervisor, "sue@shop.test", "Sue")
	a.staff(models.Auditor, "ann@shop.test", "Ann")
	ada, bob, sue, ann := a.signIn("ada@shop.test"), a.signIn("bob@shop.test"), a.signIn("sue@shop.test"), a.signIn("ann@shop.test")

	res, page := ada.get("/policy")
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="versions"`) || !strings.Contains(page, "another admin must approve every change") {
		t.Fatalf("/policy: %d", res.StatusCode)
	}
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)

	res, page = ada.post("/policy/versions", url.Values{"yaml": {"rules:\n  - name: x\n   tool: y\n"}, "csrf": {ada.csrf}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `data-testid="propose-error"`) || !strings.Contains(page, "[3:") {
		t.Fatalf("a syntax error, by line: %d %s", res.StatusCode, between(page, `propose-error`, `</pre>`))
	}
	if res, _ := ada.post("/policy/versions", url.Values{"yaml": {raised}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("proposed without CSRF: %d", res.StatusCode)
	}
	for _, who := range []*browser{sue, ann} {
		if res, _ := who.post("/policy/versions", url.Values{"yaml": {raised}, "csrf": {who.csrf}}); res.StatusCode != http.StatusForbidden {
			t.Fatalf("a non-admin proposed: %d", res.StatusCode)
		}
	}
	res, _ = ada.post("/policy/versions", url.Values{"yaml": {raised}, "note": {"up to $60"}, "csrf": {ada.csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("propose: %d", res.StatusCode)
	}
	path := strings.SplitN(res.Header.Get("Location"), "?", 2)[0]

	_, page = ada.get(path)
	if !strings.Contains(page, "You proposed this version") || strings.Contains(page, `data-testid="approve-version"`) {
		t.Fatal("the author is offered to approve their own version")
	}
	_, page = bob.get(path)
	digest := strings.TrimPrefix(between(page, `name="replay_digest" value="`, `">`), `name="replay_digest" value="`)
	if digest == "" || !strings.Contains(page, `data-testid="replay"`) {
		t.Fatal("the approver is not shown the replay with the form")
	}
	if res, _ := ada.post(path+"/approve", url.Values{"replay_digest": {digest}, "csrf": {ada.csrf}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("the author approved: %d", res.StatusCode)
	}
	if res, _ := sue.post(path+"/approve", url.Values{"replay_digest": {digest}, "csrf": {sue.csrf}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a supervisor approved: %d", res.StatusCode)
	}
	if res, _ := bob.post(path+"/approve", url.Values{"replay_digest": {digest}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("approved without CSRF: %d", res.StatusCode)
	}
	if res, page := bob.post(path+"/approve", url.Values{"replay_digest": {"another"}, "csrf": {bob.csrf}}); res.StatusCode != http.StatusConflict ||
		!strings.Contains(page, "replay you were shown") {
		t.Fatalf("approved another replay: %d", res.StatusCode)
	}
	res, _ = bob.post(path+"/approve", url.Values{"replay_digest": {digest}, "csrf": {bob.csrf}})
	if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), "done=in_force") {
		t.Fatalf("approve: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if !strings.Contains(a.gate.Policy().(interface{ YAML() string }).YAML(), "<= 60") {
		t.Fatal("not in force")
	}
	_, page = ann.get(path)
	if !strings.Contains(page, "in force") || !strings.Contains(page, "2 of 2 people") {
		t.Fatalf("the version page after: %s", between(page, `version-status`, `</dd>`))
	}
	id := strings.TrimPrefix(path, "/policy/versions/")
	res, page = ann.get("/policy/diff?from=1&to=" + id)
	if res.StatusCode != 200 || !strings.Contains(page, "-    when: args.amount &lt;= 50") || !strings.Contains(page, "+    when: args.amount &lt;= 60") {
		t.Fatalf("diff: %d %s", res.StatusCode, between(page, `data-testid="diff"`, `</pre>`))
	}
}

// A version typed on the page arrives with the browser's CRLF line ends
// (and maybe a byte-order mark and trailing blank lines): it is stored,
// hashed and diffed as the same text proposed through the API or a file,
// so the diff an approver countersigns shows the one line changed, and the
// hash is the one `countersign policy test` prints for the file.
func TestPolicyTextIsNormalizedBeforeItIsHashed(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@shop.test", "Ada")
	ada := a.signIn("ada@shop.test")
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	typed := "\uFEFF" + strings.ReplaceAll(raised, "\n", "\r\n") + "\r\n\r\n"
	res, _ := ada.post("/policy/versions", url.Values{"yaml": {typed}, "csrf": {ada.csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("propose: %d", res.StatusCode)
	}
	id := strings.TrimPrefix(strings.SplitN(res.Header.Get("Location"), "?", 2)[0], "/policy/versions/")
	res, page := ada.get("/policy/diff?from=1&to=" + id)
	diff := between(page, `data-testid="diff"`, `</pre>`)
	if res.StatusCode != 200 || strings.Count(diff, `"diff-del">`) != 2 || strings.Count(diff, `"diff-add">`) != 2 || strings.Contains(diff, "\r") {
		t.Fatalf("the diff of a version typed on the page: %d\n%s", res.StatusCode, diff)
	}
	file, err := policy.LoadPolicy([]byte(raised), "file", nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.store.PolicyVersionByID(context.Background(), mustInt(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if v.Hash != file.Version() || v.YAML != raised {
		t.Fatalf("stored as %q (hash %s), the file hashes %s", v.YAML[:40], v.Hash[:12], file.Version()[:12])
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
