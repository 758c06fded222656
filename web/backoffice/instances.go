package backoffice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/views"
)

// What each instance decides with. Until policy is shared by every instance
// (a later issue), each records its policy and tools versions at start and
// at every reload (Store.RecordInForce); /policy lists them, /healthz says
// this one's, and admins see on every page when live instances differ.

// inForceCheck caches the comparison a few seconds: every admin page asks.
type inForceCheck struct {
	mu   sync.Mutex
	at   time.Time
	text string
}

const inForceCheckEvery = 5 * time.Second

// liveInstances are the servers on the database now: those that beat
// lately (PostgreSQL), or this one (SQLite, one server).
func (s *Office) liveInstances(ctx context.Context) ([]models.Instance, error) {
	if !s.core.Store.Shared() {
		in, err := s.core.Store.InstanceRow(ctx, s.core.Store.Instance())
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil // not recorded (an app built without cmd's owner)
		}
		if err != nil {
			return nil, err
		}
		return []models.Instance{*in}, nil
	}
	return s.core.Store.LiveInstances(ctx, models.InstanceAlive)
}

// instancesDiffer says, in a sentence, how live instances differ in what
// they decide with ("" when they agree).
func (s *Office) instancesDiffer(ctx context.Context) string {
	if s.core.Store == nil || !s.core.Store.Shared() {
		return ""
	}
	vc := &s.inForce
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if time.Since(vc.at) < inForceCheckEvery {
		return vc.text
	}
	vc.at = time.Now()
	live, err := s.liveInstances(ctx)
	if err != nil {
		s.cfg.Log.Warn("could not compare the instances' versions", "err", err)
		return vc.text
	}
	policies, toolsets := map[string][]string{}, map[string][]string{}
	for _, in := range live {
		if in.PolicyVersion != "" {
			policies[in.PolicyVersion] = append(policies[in.PolicyVersion], in.Host+" "+in.ID)
		}
		if in.ToolsVersion != "" {
			toolsets[in.ToolsVersion] = append(toolsets[in.ToolsVersion], in.Host+" "+in.ID)
		}
	}
	describe := func(what string, by map[string][]string) string {
		if len(by) < 2 {
			return ""
		}
		var parts []string
		for v, hosts := range by {
			parts = append(parts, fmt.Sprintf("%s on %s", shortVersion(v), strings.Join(hosts, ", ")))
		}
		sort.Strings(parts)
		return fmt.Sprintf("The instances decide with %d different %s: %s.", len(by), what, strings.Join(parts, "; "))
	}
	vc.text = strings.TrimSpace(describe("policies", policies) + " " + describe("tool sets", toolsets))
	return vc.text
}

func shortVersion(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// instanceRows are the instances for /policy, and the newest failed reload
// of this one (if it came after its last successful load).
func (s *Office) instanceRows(ctx context.Context) ([]views.InstanceRow, string) {
	live, err := s.liveInstances(ctx)
	if err != nil {
		s.cfg.Log.Warn("could not list the instances", "err", err)
		return nil, ""
	}
	self := s.core.Store.Instance()
	var mine *models.Instance
	for i := range live {
		if live[i].ID == self {
			mine = &live[i]
		}
	}
	var rows []views.InstanceRow
	for _, in := range live {
		row := views.InstanceRow{ID: in.ID, Host: in.Host, Started: clock(in.StartedAt), LastBeat: clock(in.HeartbeatAt),
			PolicyVersion: in.PolicyVersion, ToolsVersion: in.ToolsVersion, PolicyError: in.PolicyError, This: in.ID == self}
		row.Differs = mine != nil && (in.PolicyVersion != mine.PolicyVersion || in.ToolsVersion != mine.ToolsVersion)
		rows = append(rows, row)
	}
	failed := ""
	if e, err := s.core.Store.LatestEventAbout(ctx, self); err == nil && e.Kind == models.EventPolicyReloadFailed {
		var p struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal([]byte(e.Payload), &p)
		failed = "The last reload of this instance failed at " + clock(e.At) + ", so the policy above stayed in force: " + p.Error
	}
	return rows, failed
}
