package web_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
)

// The chain export lets an auditor check the log without Countersign: this
// recomputes every link with the recipe the README gives, nothing more.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestAuditChainExportVerifiesOutsideCountersign(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann <ops> & co")
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	action := a.pendingRefund(`it "arrived" <broken>`)
	ann := a.signIn("ann@x.test")
	ann.post("/actions/"+action.ID+"/approve", map[string][]string{"csrf": {ann.csrf}, "note": {"ok & done"}})

	// The run carries on after the approval and may append events while
	// the chain is exported: the export holds at least what was there before.
	before, err := a.store.VerifyAuditChain(context.Background())
	if err != nil || !before.OK {
		t.Fatalf("before the export: %+v %v", before, err)
	}
	res, body := a.signIn("aud@x.test").get("/audit/chain.jsonl")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// A script fetches it with a staff API token (it was sent to /login),
	// and a made-up token gets 401, not the sign-in page.
	for token, want := range map[string]int{a.apiToken(models.Auditor, "script@x.test", "Script"): 200, "cst_made_up": 401} {
		req, _ := http.NewRequest("GET", a.srv.URL+"/audit/chain.jsonl", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Fatalf("the export with a token: %d, want %d", r.StatusCode, want)
		}
	}
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	prev, n := "", 0
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Seq                                     int64
			At, Actor, Kind, Subject, Payload, Hash string
			PrevHash                                string `json:"prev_hash"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		n++
		canonical := `{"seq":` + strconv.FormatInt(e.Seq, 10) + `,"at":` + str(e.At) + `,"actor":` + str(e.Actor) +
			`,"kind":` + str(e.Kind) + `,"subject":` + str(e.Subject) + `,"payload":` + e.Payload + `}`
		sum := sha256.Sum256([]byte(prev + "\n" + canonical))
		if e.Seq != int64(n) || e.PrevHash != prev || hex.EncodeToString(sum[:]) != e.Hash {
			t.Fatalf("event %d does not verify by the README's recipe: %s", n, sc.Text())
		}
		prev = e.Hash
	}
	rep, err := a.store.VerifyAuditChain(context.Background())
	if err != nil || !rep.OK || int64(n) < before.Events || int64(n) > rep.Events || n < 5 {
		t.Fatalf("exported %d events; the store said %d before and %+v after, %v", n, before.Events, rep, err)
	}
}
