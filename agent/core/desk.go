package core

import (
	"context"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// desk is where the decisions that come in through a channel (Slack's
// buttons) are carried out: the gate, with the back office's checks.
type desk struct {
	gate   *gate.Gate
	outbox *outbox.Outbox
	store  *storage.Store
}

func (d desk) Approve(ctx context.Context, actionID string, actor models.Actor, note string) error {
	_, err := d.gate.Approve(ctx, actionID, actor, gate.ApproveRequest{Note: note})
	return err
}

func (d desk) Reject(ctx context.Context, actionID string, actor models.Actor, reason string) error {
	return d.gate.Reject(ctx, actionID, actor, reason)
}

func (d desk) View(ctx context.Context, callID, by string) (outbox.Notice, error) {
	return d.outbox.View(ctx, callID, by)
}

func (d desk) Store() *storage.Store { return d.store }
