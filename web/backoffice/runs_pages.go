package backoffice

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
)

func (s *Office) runsPage(c echo.Context) error {
	status := models.RunStatus(c.QueryParam("status"))
	if status != "" && !status.Valid() {
		return fault.Errorf(fault.Invalid, "unknown status %q", status)
	}
	var afterT time.Time
	var afterID string
	if cur := c.QueryParam("after"); cur != "" {
		ts, id, ok := strings.Cut(cur, "|")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			return fault.Errorf(fault.Invalid, "the page cursor is not valid")
		}
		afterT, afterID = t, id
	}
	const page = 50
	rows, err := s.core.Store.ListRuns(c.Request().Context(), status, afterT, afterID, page+1)
	if err != nil {
		return err
	}
	v := views.RunsView{Status: string(status), Statuses: names(models.RunStatuses)}
	if len(rows) > page {
		last := rows[page-1]
		v.Next = last.UpdatedAt.UTC().Format(time.RFC3339Nano) + "|" + last.ID
		rows = rows[:page]
	}
	for _, r := range rows {
		row := views.RunRow{ID: r.ID, Status: string(r.Status), Customer: customerLabel(r.CustomerID, r.CustomerName),
			Channel: r.Channel, UpdatedAt: rfc3339(r.UpdatedAt), Turns: r.Turns, Calls: r.Calls,
			FirstMessage: tools.Truncate(strings.Join(strings.Fields(r.FirstMessage), " "), 80)}
		if r.AgentID != "" {
			// An outside agent's session: no conversation here, only its calls.
			row.Agent = strings.TrimPrefix(r.Channel, "agent:")
			row.FirstMessage = "Session " + tools.Truncate(r.Session, 60) + " of " + row.Agent + ", " + agentVia(r.Session)
		} else if row.FirstMessage == "" {
			row.FirstMessage = "(the customer has not written yet)"
		}
		v.Rows = append(v.Rows, row)
	}
	return render(c, http.StatusOK, views.Runs(v))
}

func (s *Office) runPage(c echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.core.Store.Run(ctx, c.Param("id"))
	if err != nil {
		return fault.Errorf(fault.NotFound, "run not found")
	}
	turns, err := s.core.Store.Turns(ctx, run.ID, 0)
	if err != nil {
		return err
	}
	calls, err := s.core.Store.RunCalls(ctx, run.ID)
	if err != nil {
		return err
	}
	v := views.RunView{ID: run.ID, Status: string(run.Status), Customer: customerLabel(run.CustomerID, run.CustomerName), Channel: run.Channel,
		LastError: run.LastError, Turns: turnsView(turns, calls)}
	if run.AgentID != "" {
		v.Agent, v.Session, v.Via = strings.TrimPrefix(run.Channel, "agent:"), run.Session, agentVia(run.Session)
		for i := range calls {
			c := &calls[i]
			v.Calls = append(v.Calls, views.RecentCall{ID: c.ID, Summary: s.callSummary(c), Status: string(c.Status), At: clock(c.CreatedAt)})
		}
	}
	switch c.QueryParam("done") {
	case "retried":
		v.Flash = "Retrying: the assistant is working on this conversation again."
	case "closed":
		v.Flash = "Closed. Its pending actions were cancelled and the customer was told."
	}
	return render(c, http.StatusOK, views.Run(v))
}

func (s *Office) runRetry(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.core.Runner.Retry(c.Request().Context(), id, currentStaff(c).staff.Actor()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.RunPath(id), "done=retried"))
}

func (s *Office) runClose(c echo.Context) error {
	id := c.Param("id")
	if err := s.core.Runner.CloseRun(c.Request().Context(), id, currentStaff(c).staff.Actor(), c.FormValue("reason")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.RunPath(id), "done=closed"))
}
