package storage

import (
	"context"
	"database/sql"
	"time"

	"github.com/countersign/countersign/models"
)

// Observer hears what the store's writer did, for metrics. Committed is
// called after every committed batch, on the writer's goroutine: it must be
// quick and must not write.
type Observer interface {
	// Committed says that a batch of units was committed, how long its
	// COMMIT took, and which statuses calls entered in it (one per change).
	Committed(units int, commit time.Duration, entered []models.CallStatus)
}

type observerBox struct{ o Observer }

// Observe gives the store its observer (nil: none).
func (s *Store) Observe(o Observer) {
	if o == nil {
		s.watcher.Store(nil)
		return
	}
	s.watcher.Store(&observerBox{o})
}

func (s *Store) observer() Observer {
	if b := s.watcher.Load(); b != nil {
		return b.o
	}
	return nil
}

// Pool is the database's connection pool, for its statistics.
func (s *Store) Pool() (*sql.DB, error) {
	if s.pool != nil {
		return s.pool, nil
	}
	return s.db.DB()
}

// WaitingActions counts the calls waiting for a person, on every instance,
// and says when the oldest was held.
func (s *Store) WaitingActions(ctx context.Context) (n int64, oldest time.Time, err error) {
	q := s.db.WithContext(ctx).Model(&models.ToolCall{}).Where("status = ?", models.CallPending).Where(notSucceeded)
	if err = q.Count(&n).Error; err != nil || n == 0 {
		return n, oldest, err
	}
	var first models.ToolCall
	err = s.db.WithContext(ctx).Select("created_at").Where("status = ?", models.CallPending).Where(notSucceeded).
		Order("created_at").Take(&first).Error
	return n, first.CreatedAt, notFound(err)
}

// QueuedChannel is how many notifications of one channel wait to be
// delivered, and since when the oldest does.
type QueuedChannel struct {
	Channel string
	Queued  int64
	Oldest  time.Time
}

// QueuedDeliveries is the notifications queued, by channel.
func (s *Store) QueuedDeliveries(ctx context.Context) ([]QueuedChannel, error) {
	var channels []string
	if err := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ?", models.DeliveryQueued).
		Distinct().Pluck("channel", &channels).Error; err != nil {
		return nil, err
	}
	out := make([]QueuedChannel, 0, len(channels))
	for _, ch := range channels {
		q := QueuedChannel{Channel: ch}
		db := s.db.WithContext(ctx).Model(&models.Delivery{}).Where("status = ? AND channel = ?", models.DeliveryQueued, ch)
		if err := db.Count(&q.Queued).Error; err != nil {
			return nil, err
		}
		var first models.Delivery
		if err := s.db.WithContext(ctx).Select("created_at").Where("status = ? AND channel = ?", models.DeliveryQueued, ch).
			Order("created_at").Take(&first).Error; err != nil {
			return nil, notFound(err)
		}
		q.Oldest = first.CreatedAt
		out = append(out, q)
	}
	return out, nil
}
