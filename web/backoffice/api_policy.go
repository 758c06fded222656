package backoffice

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/insights"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// The policy versions and insights over the staff API: a version is
// proposed, approved and rejected by admins' tokens, listed by any
// staff's; insights are for auditors, supervisors and admins.

// mayInsight is who reads insights: everyone but approvers, whose own
// decisions they rate.
func mayInsight(r models.StaffRole) bool { return r.Valid() && r != models.Approver }

func (s *Office) versionsOn() (*versions.Service, error) {
	if s.core.Versions == nil {
		return nil, fault.Errorf(fault.NotFound, "policy versions are not kept by this server")
	}
	return s.core.Versions, nil
}

// versionsKept answers 404 on a server that keeps no policy versions.
func (s *Office) versionsKept(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := s.versionsOn(); err != nil {
			return err
		}
		return next(c)
	}
}

type proposeRequest struct {
	YAML string `json:"yaml"`
	Note string `json:"note"`
}

// invalidPolicy answers 422 with the error shape, and the tests when they
// failed.
func invalidPolicy(c echo.Context, err error) error {
	body := map[string]any{"code": string(fault.Invalid), "message": fault.Message(err)}
	var tf *versions.TestsFailed
	if errors.As(err, &tf) {
		body["tests"] = tf.Tests
	}
	return c.JSON(http.StatusUnprocessableEntity, map[string]any{"error": body})
}

func (s *Office) apiProposeVersion(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	var req proposeRequest
	if err := s.kit.Decode(c, &req); err != nil {
		return err
	}
	v, err := vs.Propose(c.Request().Context(), versions.Proposal{YAML: []byte(req.YAML), Note: req.Note, Source: "api",
		By: currentStaff(c).staff.Actor()})
	if fault.CodeOf(err) == fault.Invalid {
		return invalidPolicy(c, err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"version": v})
}

func (s *Office) apiVersions(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	all, err := vs.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"versions": all, "people_needed": vs.People()})
}

func (s *Office) apiVersion(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	id, err := versions.ParseID(c.Param("id"))
	if err != nil {
		return err
	}
	v, err := vs.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"version": v})
}

type approveVersionRequest struct {
	Note         string `json:"note"`
	ReplayDigest string `json:"replay_digest"`
}

func (s *Office) apiApproveVersion(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	id, err := versions.ParseID(c.Param("id"))
	if err != nil {
		return err
	}
	var req approveVersionRequest
	if c.Request().ContentLength != 0 {
		if err := s.kit.Decode(c, &req); err != nil {
			return err
		}
	}
	v, err := vs.Approve(c.Request().Context(), id, versions.Approval{By: currentStaff(c).staff.Actor(), Note: req.Note, ReplayDigest: req.ReplayDigest})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"version": v})
}

type rejectVersionRequest struct {
	Reason string `json:"reason"`
}

func (s *Office) apiRejectVersion(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	id, err := versions.ParseID(c.Param("id"))
	if err != nil {
		return err
	}
	var req rejectVersionRequest
	if err := s.kit.Decode(c, &req); err != nil {
		return err
	}
	v, err := vs.Reject(c.Request().Context(), id, currentStaff(c).staff.Actor(), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"version": v})
}

// insightsQuery reads since (a duration, 720h by default), tool, and
// field with bands ("50,200") from the query string.
func insightsQuery(c echo.Context) (insights.Query, string, error) {
	since := strings.TrimSpace(c.QueryParam("since"))
	if since == "" {
		since = "720h"
	}
	d, err := time.ParseDuration(since)
	if err != nil || d <= 0 || d > 3*366*24*time.Hour {
		return insights.Query{}, since, fault.Errorf(fault.Invalid, "since is a duration such as 720h (30 days) or 24h, up to three years")
	}
	q := insights.Query{Since: time.Now().Add(-d), Tool: strings.TrimSpace(c.QueryParam("tool")), Field: strings.TrimSpace(c.QueryParam("field"))}
	if b := strings.TrimSpace(c.QueryParam("bands")); b != "" {
		if q.Bands, err = parseBands(b); err != nil {
			return q, since, err
		}
		if q.Field == "" {
			q.Field = "amount"
		}
	}
	return q, since, nil
}

func (s *Office) apiInsights(c echo.Context) error {
	if !mayInsight(currentStaff(c).staff.Role) {
		return fault.Errorf(fault.Forbidden, "insights are for auditors, supervisors and admins")
	}
	q, _, err := insightsQuery(c)
	if err != nil {
		return err
	}
	rep, err := s.readInsights(c, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// How long a request for insights waits for its turn, and how long it may
// then read.
const (
	insightsWait   = 10 * time.Second
	insightsBudget = 20 * time.Second
)

// readInsights reads insights for a person: one read at a time on this
// instance (others wait their turn, up to insightsWait, then get 503 with
// Retry-After), each within insightsBudget, on the store's report
// connections (storage.ReportConns), apart from the gate's.
func (s *Office) readInsights(c echo.Context, q insights.Query) (insights.Report, error) {
	ctx := c.Request().Context()
	wait := time.NewTimer(insightsWait)
	defer wait.Stop()
	select {
	case s.insightSlots <- struct{}{}:
	case <-wait.C:
		c.Response().Header().Set("Retry-After", "10")
		return insights.Report{}, fault.Errorf(fault.Unavailable, "insights are being read for someone else; try again in a few seconds")
	case <-ctx.Done():
		return insights.Report{}, ctx.Err()
	}
	defer func() { <-s.insightSlots }()
	rctx, cancel := context.WithTimeout(ctx, insightsBudget)
	defer cancel()
	rep, err := insights.Read(rctx, s.core.Store, s.core.Gate.Tools(), s.core.Gate.Policy(), q)
	if err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return rep, fault.Errorf(fault.Unavailable, "reading this period took over %s; choose a shorter period or one tool", insightsBudget)
	}
	return rep, err
}

// parseBands reads increasing band bounds: "50,200".
func parseBands(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || (len(out) > 0 && x <= out[len(out)-1]) || len(out) >= 10 {
			return nil, fault.Errorf(fault.Invalid, "bands are up to 10 increasing numbers, such as 50,200")
		}
		out = append(out, x)
	}
	return out, nil
}
