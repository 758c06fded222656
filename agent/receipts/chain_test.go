package receipts

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/models"
)

// A receipt names its audit chain exactly when it is of version 2: one of
// version 1 that names a chain, or of version 2 that does not, is refused
// even though its signature holds, so a receipt cannot be moved to another
// chain's event by changing its version. A version 2 payload is canonical
// as written (its audit's chain sorts first).
func TestAReceiptNamesItsChainOnlyInVersionTwo(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: KeyID(pub), Algorithm: "EdDSA", Use: "sig"}}}
	at := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	payload := func(version int, chain int64) models.ReceiptPayload {
		return models.ReceiptPayload{Version: version, Call: "call_1", Status: models.CallSucceeded, SignedAt: at,
			Times: models.ReceiptTimes{Asked: at}, Audit: models.ReceiptAudit{Chain: chain, Seq: 7, Hash: strings.Repeat("a", 64)},
			Envelope: models.Envelope{Tool: "pay", Run: "run_1", Decision: "allow", Approvals: []models.EnvelopeApproval{}}}
	}
	for _, c := range []struct {
		version int
		chain   int64
		ok      bool
	}{{1, 0, true}, {2, 3, true}, {1, 3, false}, {2, 0, false}} {
		p := payload(c.version, c.chain)
		got, err := Canonical(p)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := jcs.Transform(got); string(want) != string(got) {
			t.Fatalf("version %d, chain %d: not canonical:\n%s\n%s", c.version, c.chain, got, want)
		}
		jws, err := Sign(p, KeyID(pub), priv)
		if err != nil {
			t.Fatal(err)
		}
		back, _, err := Verify(jws, keys)
		switch {
		case c.ok && (err != nil || back.Audit.Chain != c.chain):
			t.Errorf("version %d, chain %d: %v (chain read %d)", c.version, c.chain, err, back.Audit.Chain)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "names audit chain")):
			t.Errorf("version %d, chain %d: accepted (%v)", c.version, c.chain, err)
		}
	}
}
