package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// CreateAgent stores an outside agent with its key's hash.
func (s *Store) CreateAgent(ctx context.Context, a *models.Agent, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		a.CreatedAt = tx.now
		if err := tx.db.Create(a).Error; err != nil {
			return fmt.Errorf("create agent: %w", err)
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventAgentCreated, Subject: a.ID, Payload: models.AgentCreatedPayload{Name: a.Name}})
	})
}

// Agents lists the outside agents, by name.
func (s *Store) Agents(ctx context.Context) ([]models.Agent, error) {
	var out []models.Agent
	err := s.db.WithContext(ctx).Order("name").Find(&out).Error
	return out, err
}

// AgentByName reads one outside agent.
func (s *Store) AgentByName(ctx context.Context, name string) (*models.Agent, error) {
	var a models.Agent
	if err := s.db.WithContext(ctx).Take(&a, "name = ?", name).Error; err != nil {
		return nil, notFound(err)
	}
	return &a, nil
}

// SetAgentLimits gives an agent limits of its own, audited.
func (s *Store) SetAgentLimits(ctx context.Context, name string, l models.AgentLimits, actor models.Actor) error {
	return s.Write(ctx, func(tx *Tx) error {
		var a models.Agent
		if err := tx.db.Take(&a, "name = ? AND revoked_at IS NULL", name).Error; err != nil {
			return notFound(err)
		}
		if err := tx.db.Model(&models.Agent{}).Where("id = ?", a.ID).Updates(map[string]any{"calls_per_second": l.CallsPerSecond,
			"call_burst": l.CallBurst, "max_waiting": l.MaxWaiting}).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventAgentLimitsSet, Subject: a.ID,
			Payload: models.AgentLimitsSetPayload{CallBurst: l.CallBurst, CallsPerSecond: l.CallsPerSecond, MaxWaiting: l.MaxWaiting, Name: a.Name}})
	})
}

// LiveAgent reads an outside agent by id, if it is not revoked.
func (s *Store) LiveAgent(ctx context.Context, id string) (*models.Agent, error) {
	var a models.Agent
	if err := s.db.WithContext(ctx).Take(&a, "id = ? AND revoked_at IS NULL", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &a, nil
}

// AgentForKey finds the agent a key (hashed) belongs to, if not revoked.
// It is read on every request an agent makes: through a prepared
// statement, not gorm.
func (s *Store) AgentForKey(ctx context.Context, keyHash string) (*models.Agent, error) {
	row, err := s.readRow(ctx, agentForKey, keyHash)
	if err != nil {
		return nil, err
	}
	var a models.Agent
	var revoked, used sql.NullTime
	if err := row.Scan(&a.ID, &a.Name, &a.KeyHash, &a.CreatedAt, &revoked, &used, &a.CallsPerSecond, &a.CallBurst, &a.MaxWaiting); err != nil {
		return nil, notFound(err)
	}
	if used.Valid {
		a.LastUsedAt = &used.Time
	}
	return &a, nil
}

const agentForKey = `SELECT id, name, key_hash, created_at, revoked_at, last_used_at,
	COALESCE(calls_per_second, 0), COALESCE(call_burst, 0), COALESCE(max_waiting, 0)
	FROM agents WHERE key_hash = ? AND revoked_at IS NULL`

// RevokeAgent ends an agent's key at once and, in the same unit, cancels
// the actions it has waiting for a person: a write asked for by an agent no
// longer trusted does not run, whoever would approve it later. It returns
// the calls it cancelled.
func (s *Store) RevokeAgent(ctx context.Context, id, actor string) (cancelled []string, err error) {
	err = s.Write(ctx, func(tx *Tx) error {
		cancelled = nil
		res := tx.db.Model(&models.Agent{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", tx.now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.ErrNotFound
		}
		if err := tx.Audit(models.Event{Actor: actor, Kind: models.EventAgentRevoked, Subject: id, Payload: models.AgentRevokedPayload{}}); err != nil {
			return err
		}
		var waiting []string
		if err := tx.db.Model(&models.ToolCall{}).Where("status = ? AND run_id IN (?)", models.CallPending,
			tx.db.Model(&models.Run{}).Select("id").Where("agent_id = ?", id)).Where(notSucceeded).Order("id").Pluck("id", &waiting).Error; err != nil {
			return err
		}
		for _, callID := range waiting {
			if err := tx.ChangeCallStatus(models.CallChange{ID: callID, From: []models.CallStatus{models.CallPending}, To: models.CallCancelled,
				Error: "cancelled: " + models.RevokedAgentReason}); err != nil {
				return err
			}
			if err := tx.Audit(models.Event{Actor: actor, Kind: models.EventActionCancelled, Subject: callID,
				Payload: models.ActionCancelledPayload{Reason: models.RevokedAgentReason}}); err != nil {
				return err
			}
		}
		cancelled = waiting
		return nil
	})
	return cancelled, err
}

// AgentRun is the run that holds an agent's calls in one session, made the
// first time the session is seen. A session belongs to one customer (or to
// none): a call naming another is ErrConflict. What it returns is what never
// changes of the run (its id, agent, session, customer and channel), not
// its status: read the run (Run) for that.
func (s *Store) AgentRun(ctx context.Context, agent *models.Agent, session, customerID string) (*models.Run, error) {
	if run := s.sessionRuns.get(agent.ID, session); run != nil {
		if run.CustomerID != customerID {
			return nil, models.ErrConflict
		}
		return run, nil
	}
	var run models.Run
	// Most calls come in a session already seen: a read, no write.
	if err := s.db.WithContext(ctx).Take(&run, "agent_id = ? AND session = ?", agent.ID, session).Error; err == nil {
		s.sessionRuns.put(&run)
		if run.CustomerID != customerID {
			return nil, models.ErrConflict
		}
		return s.sessionRuns.get(agent.ID, session), nil
	}
	err := s.Write(ctx, func(tx *Tx) error {
		// Two instances seeing the session first at once make one run.
		if err := tx.Serialize("session:" + agent.ID + "\x00" + session); err != nil {
			return err
		}
		err := tx.db.Take(&run, "agent_id = ? AND session = ?", agent.ID, session).Error
		if err == nil {
			if run.CustomerID != customerID {
				return models.ErrConflict
			}
			return nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		run = models.Run{ID: models.NewID("run"), AgentID: agent.ID, Session: session, CustomerID: customerID,
			Channel: "agent:" + agent.Name, Status: models.RunWaiting}
		return tx.CreateRun(&run)
	})
	if err != nil {
		return nil, err
	}
	s.sessionRuns.put(&run)
	return s.sessionRuns.get(agent.ID, session), nil
}

// sessionRuns keeps what never changes of the runs of agents' sessions,
// once read, so that the calls of a session seen before read nothing to
// find their run: a run is never deleted, and its id, agent, session,
// customer and channel are set when it is made. At most maxSessionRuns are
// kept (all let go when full).
type sessionRuns struct {
	mu sync.Mutex
	m  map[[2]string]models.Run
}

const maxSessionRuns = 10_000

// get is the run of an agent's session as kept (nil: not kept), a copy
// with only what never changes.
func (r *sessionRuns) get(agentID, session string) *models.Run {
	r.mu.Lock()
	run, ok := r.m[[2]string{agentID, session}]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	return &run
}

func (r *sessionRuns) put(run *models.Run) {
	kept := models.Run{ID: run.ID, AgentID: run.AgentID, Session: run.Session, CustomerID: run.CustomerID, Channel: run.Channel}
	r.mu.Lock()
	if r.m == nil || len(r.m) >= maxSessionRuns {
		r.m = make(map[[2]string]models.Run)
	}
	r.m[[2]string{run.AgentID, run.Session}] = kept
	r.mu.Unlock()
}

// CallByAgentKey finds the call an agent made with an Idempotency-Key.
func (s *Store) CallByAgentKey(ctx context.Context, agentKey string) (*models.ToolCall, error) {
	var c models.ToolCall
	if err := s.db.WithContext(ctx).Take(&c, "agent_key = ?", agentKey).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// RevokedAgents is which of the agents ids names have had their key revoked.
func (s *Store) RevokedAgents(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []string
	err := s.db.WithContext(ctx).Model(&models.Agent{}).Where("id IN ? AND revoked_at IS NOT NULL", ids).Pluck("id", &out).Error
	return out, err
}

// SameAgentCall is the call an outside agent means when it asks again for
// the same tool, arguments (normalized JSON and hash; a call a person
// edited is found by the arguments the agent sent) and customer, from any
// of its sessions: one that waits for a person or is about to run or runs,
// or one a person decided that ended within window (0: none such).
func (tx *Tx) SameAgentCall(agentID, customerID, tool, args, argsHash string, window time.Duration) (*models.ToolCall, error) {
	return sameAgentCall(tx.db, tx.now, agentID, customerID, tool, args, argsHash, window)
}

// openCallStatuses are the calls a person may yet decide, or that run;
// replayedStatuses those whose outcome answers the same intent again.
var (
	openCallStatuses = models.CallStatusesWhere(models.CallStatus.Open)
	replayedStatuses = models.CallStatusesWhere(models.CallStatus.Replayed)
)

func sameAgentCall(db *gorm.DB, now time.Time, agentID, customerID, tool, args, argsHash string, window time.Duration) (*models.ToolCall, error) {
	var rows []models.ToolCall
	runs := db.Session(&gorm.Session{NewDB: true}).Model(&models.Run{}).Select("id").Where("agent_id = ?", agentID)
	now = now.UTC()
	since := now.Add(-window)
	q := db.Model(&models.ToolCall{}).Where("tool = ? AND created_at >= ?", tool, now.Add(-models.SameCallWindow-window)).
		Where("decision = ? AND customer_id = ? AND run_id IN (?)", models.DecidedNeedsApproval, customerID, runs)
	if window > 0 {
		// Whether the outcome reached the agent is not guessed: the same
		// intent gets the same outcome for the window after it ended.
		q = q.Where("status IN ? OR (status IN ? AND (finished_at >= ? OR (finished_at IS NULL AND decided_at >= ?)))",
			openCallStatuses, replayedStatuses, since, since)
	} else {
		q = q.Where("status IN ?", openCallStatuses)
	}
	err := q.Find(&rows).Error
	if err != nil {
		return nil, err
	}
	var found *models.ToolCall
	for i := range rows {
		c := &rows[i]
		same := (c.ArgsHash == argsHash && c.OriginalArgs == "") || c.OriginalArgs == args
		if same && (found == nil || c.CreatedAt.After(found.CreatedAt) || (c.CreatedAt.Equal(found.CreatedAt) && c.ID > found.ID)) {
			found = c
		}
	}
	if found == nil {
		return nil, models.ErrNotFound
	}
	return found, nil
}

// MarkDelivered records when the agent was first handed a call's outcome
// (for people reading the record; the same intent asked again is still
// that call, within the intent window).
func (s *Store) MarkDelivered(ctx context.Context, callID string) error {
	return s.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE tool_calls SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL`, tx.now, callID)
		return err
	})
}

// AgentsRevokedSince are the agents whose key was revoked after since.
func (s *Store) AgentsRevokedSince(ctx context.Context, since time.Time) ([]string, error) {
	var out []string
	err := s.db.WithContext(ctx).Model(&models.Agent{}).Where("revoked_at > ?", since.UTC()).Order("id").Pluck("id", &out).Error
	return out, err
}
