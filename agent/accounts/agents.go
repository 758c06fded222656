package accounts

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// Agent keys let an outside agent ask the gate (POST /api/v1/calls). They
// are neither staff tokens nor run tokens: an agent key decides nothing and
// reads no conversation, it only asks for calls and learns their outcome.

var agentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// AddAgent registers an outside agent and returns its key, shown once; only
// its hash is kept.
func (a *Service) AddAgent(ctx context.Context, name string, by models.Actor) (string, *models.Agent, error) {
	name = strings.TrimSpace(name)
	if !agentName.MatchString(name) {
		return "", nil, fault.Errorf(fault.Invalid, "an agent's name is letters, digits, '.', '_' or '-', at most 100 (got %q)", name)
	}
	if _, err := a.store.AgentByName(ctx, name); err == nil {
		return "", nil, fault.Errorf(fault.Conflict, "an agent named %s already exists", name)
	}
	key, hash := randomToken("csa_")
	ag := &models.Agent{ID: models.NewID("agt"), Name: name, KeyHash: hash}
	if err := a.store.CreateAgent(ctx, ag, by.String()); err != nil {
		return "", nil, fault.Wrap(err, "could not add the agent")
	}
	return key, ag, nil
}

// AgentForKey is the agent a key belongs to; a revoked or unknown key is
// unauthorized.
func (a *Service) AgentForKey(ctx context.Context, key string) (*models.Agent, error) {
	ag, err := a.store.AgentForKey(ctx, models.HashToken(strings.TrimSpace(key)))
	if errors.Is(err, models.ErrNotFound) {
		return nil, fault.Errorf(fault.Unauthorized, "this agent key is not valid (revoked, or never issued here)")
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return ag, nil
}

// RevokeAgent ends an agent's key at once: its open requests end within a
// few seconds (web's holds), and its actions waiting for a person are
// cancelled (the calls returned).
func (a *Service) RevokeAgent(ctx context.Context, name string, by models.Actor) ([]string, error) {
	ag, err := a.store.AgentByName(ctx, name)
	if err != nil {
		return nil, fault.Errorf(fault.NotFound, "no agent is named %s", name)
	}
	cancelled, err := a.store.RevokeAgent(ctx, ag.ID, by.String())
	if err != nil {
		if errors.Is(err, models.ErrNotFound) {
			return nil, fault.Errorf(fault.Conflict, "the agent %s is already revoked", name)
		}
		return nil, fault.Wrap(err, "could not revoke the agent")
	}
	if a.Revoked != nil {
		a.Revoked(ag.ID, cancelled)
	}
	return cancelled, nil
}

// MaxAgentLimit bounds each of an agent's own limits.
const MaxAgentLimit = 100_000

// SetAgentLimits gives an agent limits of its own (0: the instance's), an
// admin's act, audited.
func (a *Service) SetAgentLimits(ctx context.Context, name string, l models.AgentLimits, by models.Actor) error {
	if by.Role != models.Admin {
		return fault.Errorf(fault.Forbidden, "only an admin can set an agent's limits")
	}
	for _, n := range []int{l.CallsPerSecond, l.CallBurst, l.MaxWaiting} {
		if n < 0 || n > MaxAgentLimit {
			return fault.Errorf(fault.Invalid, "an agent's limits are numbers from 0 (the instance's) to %d", MaxAgentLimit)
		}
	}
	if err := a.store.SetAgentLimits(ctx, name, l, by); errors.Is(err, models.ErrNotFound) {
		return fault.Errorf(fault.NotFound, "there is no agent named %s that is not revoked", name)
	} else if err != nil {
		return fault.Wrap(err, "could not set the limits")
	}
	return nil
}
