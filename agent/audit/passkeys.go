package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// PasskeyReport is what checking the kept passkey signatures found.
type PasskeyReport struct {
	Signed   int      // verdicts kept with a passkey signature
	Failures []string // one line per signature that does not check out, naming the approval
}

// VerifyPasskeys checks every verdict kept with a passkey signature (on
// actions, and admins' approvals of policy versions and staff changes): the
// challenge made again from the call's record (its id, the arguments the
// verdict was given on, the verdict) and the signature against the
// person's registered public key. A changed argument, a changed
// signature, or a passkey record that is gone each fail, by approval.
func VerifyPasskeys(ctx context.Context, store *storage.Store) (PasskeyReport, error) {
	var rep PasskeyReport
	err := store.PasskeyApprovals(ctx, func(a *models.Approval) error {
		rep.Signed++
		fail := func(format string, args ...any) {
			rep.Failures = append(rep.Failures, fmt.Sprintf("approval %d (call %s, %s by %s): ", a.ID, a.ToolCallID, a.Verdict, a.StaffName)+fmt.Sprintf(format, args...))
		}
		var sig models.PasskeySignature
		if err := json.Unmarshal([]byte(a.Passkey), &sig); err != nil {
			fail("the kept signature does not decode: %v", err)
			return nil
		}
		key, err := store.PasskeyByID(ctx, sig.CredentialID)
		if err != nil {
			fail("the passkey that signed it (%s) is not registered here", sig.CredentialID)
			return nil
		}
		if key.StaffID != a.StaffID {
			fail("the passkey that signed it belongs to another account")
			return nil
		}
		if err := accounts.CheckSignature(sig, *key, a.ToolCallID, a.ArgsHash, a.Verdict); err != nil {
			fail("%v", err)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	admins, err := store.SignedAdminApprovals(ctx)
	if err != nil {
		return rep, err
	}
	for _, a := range admins {
		rep.Signed++
		fail := func(format string, args ...any) {
			rep.Failures = append(rep.Failures, fmt.Sprintf("approval of %s by %s: ", a.What, a.StaffName)+fmt.Sprintf(format, args...))
		}
		var sig models.PasskeySignature
		if err := json.Unmarshal([]byte(a.Passkey), &sig); err != nil {
			fail("the kept signature does not decode: %v", err)
			continue
		}
		key, err := store.PasskeyByID(ctx, sig.CredentialID)
		if err != nil || key.StaffID != a.StaffID {
			fail("the passkey that signed it (%s) is not this admin's", sig.CredentialID)
			continue
		}
		if err := accounts.CheckSignature(sig, *key, a.Subject, a.Digest, "approve"); err != nil {
			fail("%v", err)
		}
	}
	return rep, nil
}
