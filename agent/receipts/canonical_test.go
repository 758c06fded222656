package receipts

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/models"
)

// A receipt payload written straight is exactly what RFC 8785 says (as
// gowebpki/jcs writes it), whatever its strings hold: the fields are in
// canonical order and what JCS escapes otherwise goes through it.
func TestCanonicalIsRFC8785(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 123456000, time.UTC)
	for _, name := range []string{"Ann", "Zoë <ann&co>", "line\u2028sep", "tab\there", "quote\"back\\slash", "ctl\x01", "日本", "😀"} {
		p := models.ReceiptPayload{Version: 1, Call: "call_1", Status: models.CallSucceeded, ResultDigest: "ab", ErrorDigest: "cd",
			Times: models.ReceiptTimes{Asked: at, Decided: &at, Started: &at, Finished: &at}, Audit: models.ReceiptAudit{Seq: 12, Hash: "ef"}, SignedAt: at,
			Envelope: models.Envelope{Tool: "pay", ToolDigest: "01", ArgsDigest: "02", AskedBy: "agent:" + name, Agent: "agt_1", Session: name, Run: "run_1",
				Customer: "cus_1", PolicyVersion: "v1", Decision: "needs_approval", Rule: "r", Required: 2, RequiredRole: "supervisor",
				Approvals: []models.EnvelopeApproval{{Staff: "stf_1", Name: name, Role: models.Approver, Verdict: "approve", At: at, ArgsDigest: "02",
					ToolDigest: "01", PolicyVersion: "v1", SeenDigest: "03"}}}}
		for _, withPasskey := range []bool{false, true} {
			if withPasskey {
				p.Envelope.Approvals[0].Passkey = &models.PasskeySignature{CredentialID: "c", RPID: "localhost", Origin: "http://localhost", CallID: "call_1",
					ArgsHash: "02", Verdict: "approve", SummaryDigest: "04", Nonce: "n", Assertion: `{"id":"c"}`}
			}
			got, err := Canonical(p)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := json.Marshal(p)
			want, err := jcs.Transform(plain)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("%q (passkey %v):\n got %s\nwant %s", name, withPasskey, got, want)
			}
		}
	}
}
