package receipts

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// StoredReport is what checking the kept receipts found.
type StoredReport struct {
	// Receipts were checked; Missing final calls have none (a server
	// that was stopped before it signed them signs them when it starts).
	Receipts, Missing int
	// Failures name each receipt that does not verify or does not say
	// what the records say (the first 100).
	Failures     []string
	MoreFailures int
}

// VerifyStored checks every kept receipt against the published keys and
// the records: its signature, and that it names the call's status, its
// arguments' digest and its last audit event as they are now.
func VerifyStored(ctx context.Context, store *storage.Store) (StoredReport, error) {
	var rep StoredReport
	keys, err := PublicKeys(ctx, store)
	if err != nil {
		return rep, err
	}
	fail := func(format string, args ...any) {
		if len(rep.Failures) < 100 {
			rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...))
		} else {
			rep.MoreFailures++
		}
	}
	err = store.EachReceipt(ctx, 500, func(batch []models.Receipt) error {
		ids := make([]string, len(batch))
		for i, r := range batch {
			ids[i] = r.CallID
		}
		calls, events, _, err := store.ReceiptRecords(ctx, ids)
		if err != nil {
			return err
		}
		byID := map[string]*models.ToolCall{}
		for i := range calls {
			byID[calls[i].ID] = &calls[i]
		}
		for _, r := range batch {
			rep.Receipts++
			p, _, err := Verify(r.JWS, keys)
			if err != nil {
				fail("receipt of call %s: %v", r.CallID, err)
				continue
			}
			c, evs := byID[r.CallID], events[r.CallID]
			switch {
			case c == nil:
				fail("receipt of call %s: the call is not in the database", r.CallID)
			case p.Call != c.ID:
				fail("receipt kept for call %s is the receipt of %s", r.CallID, p.Call)
			case p.Status != c.Status:
				fail("receipt of call %s says %s; the record says %s", c.ID, p.Status, c.Status)
			case p.Envelope.ArgsDigest != c.ArgsHash:
				fail("receipt of call %s is over other arguments than the record's", c.ID)
			case len(evs) == 0 || evs[len(evs)-1].Chain != p.Audit.Chain || evs[len(evs)-1].Seq != p.Audit.Seq || evs[len(evs)-1].Hash != p.Audit.Hash:
				fail("receipt of call %s names audit %s, which is not the call's last as the chain holds it", c.ID, models.EventName(p.Audit.Chain, p.Audit.Seq))
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	removed, err := removedReceipts(ctx, store, fail)
	if err != nil {
		return rep, err
	}
	ids, err := store.CallsWithoutReceipt(ctx, time.Time{}, 10000)
	if err != nil {
		return rep, err
	}
	rep.Missing = max(len(ids)-removed, 0) // counted up to 10,000
	return rep, nil
}

// removedReceipts fails each call (up to 101) whose receipt was removed and
// says how many it found. A final call is signed within a sweep of its end
// by any server that runs, and at its start by one that starts after: a
// call that ended well before a receipt that was kept has none because it
// was removed (or signing it failed, which the server logged).
func removedReceipts(ctx context.Context, store *storage.Store, fail func(string, ...any)) (int, error) {
	newest, err := store.NewestReceiptAt(ctx)
	if err != nil || newest.IsZero() {
		return 0, err
	}
	gone, err := store.CallsWithoutReceiptEndedBefore(ctx, newest.Add(-Overdue), 101)
	if err != nil {
		return 0, err
	}
	for _, c := range gone {
		ended := c.UpdatedAt
		if c.FinishedAt != nil {
			ended = *c.FinishedAt
		}
		fail("receipt of call %s is MISSING: the call ended %s, and receipts were kept until %s, so it was signed and removed (or signing it failed: see the server's log)",
			c.ID, ended.UTC().Format(time.RFC3339), newest.UTC().Format(time.RFC3339))
	}
	return len(gone), nil
}

// Overdue is how long after a call ended a kept receipt shows that the
// call's own should be there: two full sweeps of the signer.
const Overdue = 2 * FullSweep
