package receipts

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Receipts signed with their call's outcome, for the answer that carries
// them (an MCP result's _meta["countersign/receipt"]).

// Fresh is the receipt of a call that ended just now (its answer, ended,
// is on its way to the agent that asked): signed and kept without looking
// for one first, unless another instance or the sweep kept one before,
// which then is the receipt. The result is not read again: it is ended's
// when the call's record ended as ended did.
func (s *Signer) Fresh(ctx context.Context, ended *models.ToolCall) (*models.Receipt, error) {
	if r, ok := s.signed.LoadAndDelete(ended.ID); ok {
		s.nSigned.Add(-1)
		return r.(*models.Receipt), nil
	}
	return s.keep(ctx, ended.ID, ended)
}

// SignWithin signs and keeps, in the unit of work that records its
// outcome, the receipt of a call that ends there, from the records as the
// unit wrote them (known, an allowed call's records as the gate wrote
// them, or else read back in the unit): the answer that carries it (Fresh)
// then reads and writes nothing more. Its error leaves nothing written: the unit goes on,
// and the receipt is signed as any other.
func (s *Signer) SignWithin(ctx context.Context, tx *storage.Tx, callID string, known *models.ReceiptRecords) error {
	if s.nSigned.Load() >= maxSigned {
		return errors.New("too many receipts wait for their answers")
	}
	// known is every record of an allowed call (it has no verdicts)
	whole := known != nil && known.Call != nil && known.Call.ID == callID && known.Call.Decision == models.DecidedAllow
	if whole && tx.Batched() && known.Call.Status.Final() {
		s.signBeside(ctx, tx, known)
		return nil
	}
	return tx.Try(func(tx *storage.Tx) error {
		var call *models.ToolCall
		var events []models.AuditEvent
		var approvals []models.Approval
		var err error
		if whole {
			call, events = known.Call, known.Events
		} else if call, events, approvals, err = tx.ReceiptRecord(callID); err != nil {
			return err
		}
		if !call.Status.Final() {
			return ErrNotFinal
		}
		r, err := s.signRecords(ctx, call, events, approvals, s.signing(), time.Now())
		if err != nil {
			return err
		}
		kept, err := tx.KeepReceipt(r)
		if err != nil {
			return err
		}
		s.heldForAnswer(tx, kept)
		return nil
	})
}

// signBeside signs an allowed call's receipt, from its records as known, on
// a goroutine of its own while the other units of the batch run, and keeps
// it before the batch commits (storage.Tx.BeforeCommit): a batch's
// receipts are signed side by side instead of one after another in the
// writer's turn (BENCHMARKS.md, "Receipts of a batch signed side by
// side"). Alone in its batch, a unit has nothing to overlap and signs in
// place. The signature of a unit undone is left unused.
func (s *Signer) signBeside(ctx context.Context, tx *storage.Tx, known *models.ReceiptRecords) {
	type signed struct {
		r   models.Receipt
		err error
	}
	done := make(chan signed, 1)
	k, now := s.signing(), time.Now()
	go func() {
		r, err := s.signRecords(ctx, known.Call, known.Events, nil, k, now)
		done <- signed{r, err}
	}()
	tx.BeforeCommit(func(tx *storage.Tx) error {
		got := <-done
		if got.err != nil {
			s.log.Debug("the receipt is signed after the outcome", "call_id", known.Call.ID, "err", got.err)
			return got.err
		}
		kept, err := tx.KeepReceipt(got.r)
		if err != nil {
			return err
		}
		s.heldForAnswer(tx, kept)
		return nil
	})
}

// heldForAnswer holds a receipt kept in tx, once tx commits, for the
// answer that carries it (Fresh).
func (s *Signer) heldForAnswer(tx *storage.Tx, kept *models.Receipt) {
	tx.AfterCommit(func() {
		if _, had := s.signed.Swap(kept.CallID, kept); !had {
			s.nSigned.Add(1)
		}
	})
}
