package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/models"
)

// A receipt as a JWS: signed, its payload canonical, checked.

// Sign signs a payload as a receipt.
func Sign(p models.ReceiptPayload, kid string, key ed25519.PrivateKey) (string, error) {
	body, err := Canonical(p)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(Type))
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(body)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// Canonical is v as RFC 8785 canonical JSON. A receipt payload is written
// straight: its fields are declared in canonical order, its numbers are
// integers, and nothing in it is escaped but what JCS escapes the same
// way; anything else (a passkey's signature, whose fields are not in that
// order; a string that needs a \u escape) goes through gowebpki/jcs.
func Canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if p, ok := v.(models.ReceiptPayload); ok && straight(p) && !bytes.Contains(b, []byte(`\u`)) {
		return b, nil
	}
	return jcs.Transform(b)
}

// straight: nothing in the payload is written out of canonical order.
func straight(p models.ReceiptPayload) bool {
	for _, a := range p.Envelope.Approvals {
		if a.Passkey != nil {
			return false
		}
	}
	return true
}

// Verify checks a receipt against a key set: the signature by the key its
// kid names, EdDSA, and a payload that is canonical JSON. It returns the
// payload.
func Verify(receipt string, keys jose.JSONWebKeySet) (models.ReceiptPayload, []byte, error) {
	var p models.ReceiptPayload
	obj, err := jose.ParseSignedCompact(receipt, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return p, nil, fmt.Errorf("not a compact JWS signed with EdDSA: %w", err)
	}
	if len(obj.Signatures) != 1 {
		return p, nil, errors.New("a receipt has one signature")
	}
	kid := obj.Signatures[0].Header.KeyID
	found := keys.Key(kid)
	if len(found) == 0 {
		return p, nil, fmt.Errorf("no published key has the kid %q", kid)
	}
	body, err := obj.Verify(found[0].Key)
	if err != nil {
		return p, nil, fmt.Errorf("the signature does not verify with key %s", kid)
	}
	if canon, err := jcs.Transform(body); err != nil || string(canon) != string(body) {
		return p, nil, errors.New("the payload is not canonical JSON (RFC 8785)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, nil, fmt.Errorf("the payload is not a receipt: %w", err)
	}
	switch {
	case p.Version != models.ReceiptVersion && p.Version != models.ReceiptVersionChained:
		return p, nil, fmt.Errorf("receipt version %d is not one this verifier knows", p.Version)
	case (p.Version == models.ReceiptVersionChained) != (p.Audit.Chain != 0):
		return p, nil, fmt.Errorf("a receipt of version %d names audit chain %d", p.Version, p.Audit.Chain)
	}
	return p, body, nil
}
