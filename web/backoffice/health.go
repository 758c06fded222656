package backoffice

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/labstack/echo/v4"
)

// healthz says the process and its database are alive, and what it
// decides with.
func (s *Office) healthz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.core.Store.Ping(ctx); err != nil {
		s.cfg.Log.Error("health check failed", "err", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	}
	out := map[string]string{"status": "ok", "policy_version": s.core.Gate.Policy().Version(), "instance": s.core.Store.Instance()}
	if in, err := s.core.Store.InstanceRow(ctx, s.core.Store.Instance()); err == nil {
		out["tools_version"] = in.ToolsVersion
	}
	if d := s.instancesDiffer(ctx); d != "" {
		out["versions_differ"] = d
	}
	return c.JSON(http.StatusOK, out)
}

// readyz says whether this instance should be sent traffic: the database
// answers, its schema is the one this binary migrates to, a policy and the
// tools are loaded. 503 with what is wrong otherwise. (/healthz says only
// that the process and its database are alive.)
func (s *Office) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	var problems []string
	out := map[string]any{}
	if err := s.core.Store.Ping(ctx); err != nil {
		problems = append(problems, "the database does not answer")
	} else if have, want, err := s.core.Store.Schema(ctx); err != nil {
		problems = append(problems, "the schema's version cannot be read")
	} else {
		out["schema"], out["schema_expected"] = have, want
		if have != want {
			problems = append(problems, fmt.Sprintf("the database is at migration %d, this binary expects %d", have, want))
		}
	}
	if p := s.core.Gate.Policy(); p == nil || p.Version() == "" {
		problems = append(problems, "no policy is loaded")
	} else if nl, ok := p.(*policy.NotLoaded); ok {
		// fail closed: it denies every call, so a load balancer had better
		// send them elsewhere
		problems = append(problems, nl.Problem()+"; every call is denied until it loads")
		out["policy_version"] = nl.Hash
	} else {
		out["policy_version"] = p.Version()
	}
	n := len(s.core.Gate.Tools().All())
	out["tools"] = n
	if n == 0 {
		problems = append(problems, "no tools are loaded")
	}
	out["text_search_indexed"] = s.core.Store.TextIndexed()
	if len(problems) > 0 {
		out["status"], out["problems"] = "not ready", problems
		return c.JSON(http.StatusServiceUnavailable, out)
	}
	out["status"] = "ready"
	return c.JSON(http.StatusOK, out)
}
