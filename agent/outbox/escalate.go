package outbox

import (
	"context"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Escalate marks overdue the pending actions nobody answered for
// EscalateAfter (supervisors are told: action.overdue) and reminds the
// approvers of those that expire within RemindBefore (action.reminder).
// Each action is marked once, on one instance. Times are the store's clock.
func (o *Outbox) Escalate(ctx context.Context) (overdue, reminded int, err error) {
	now := o.store.Now().UTC()
	if o.cfg.EscalateAfter > 0 {
		late, err := o.store.Unanswered(ctx, now.Add(-o.cfg.EscalateAfter), 100)
		if err != nil {
			return 0, 0, err
		}
		for _, c := range late {
			ok, err := o.mark(ctx, c, models.EventActionOverdue, (*storage.Tx).MarkOverdue,
				models.ActionOverduePayload{WaitingSince: c.CreatedAt.UTC().Format(time.RFC3339), After: o.cfg.EscalateAfter.String()})
			if err != nil {
				return overdue, reminded, err
			}
			if ok {
				overdue++
			}
		}
	}
	if o.cfg.RemindBefore > 0 {
		soon, err := o.store.ExpiringBy(ctx, now, now.Add(o.cfg.RemindBefore), 100)
		if err != nil {
			return overdue, reminded, err
		}
		for _, c := range soon {
			ok, err := o.mark(ctx, c, models.EventActionReminder, (*storage.Tx).MarkReminded,
				models.ActionReminderPayload{ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339)})
			if err != nil {
				return overdue, reminded, err
			}
			if ok {
				reminded++
			}
		}
	}
	return overdue, reminded, nil
}

func (o *Outbox) mark(ctx context.Context, c models.ToolCall, kind models.EventKind, set func(*storage.Tx, string) (bool, error), payload models.EventPayload) (bool, error) {
	var marked bool
	err := o.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		if marked, err = set(tx, c.ID); err != nil || !marked {
			return err
		}
		return tx.Audit(models.Event{Actor: models.SystemActor.String(), Kind: kind, Subject: c.ID, Payload: payload})
	})
	if marked && o.cfg.Changed != nil {
		o.cfg.Changed(c.ID)
	}
	return marked, err
}
