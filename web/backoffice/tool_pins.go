package backoffice

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
	"github.com/pmezard/go-difflib/difflib"

	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// The MCP servers' tools whose definition is new or changed since accepted
// wait on /tools for an admin, each with what changed; until accepted they
// are held at high_write (agent/pins.go).

// unacceptedRows are those tools, for the tools page.
func (s *Office) unacceptedRows(c echo.Context) []views.UnacceptedRow {
	var rows []views.UnacceptedRow
	for _, u := range s.core.Gate.Unaccepted() {
		now := prettyJSON(string(u.Tool.Listing))
		row := views.UnacceptedRow{Name: u.Tool.Name, Upstream: u.Tool.Upstream, Risk: string(u.Tool.Risk), Hash: u.Tool.ListingHash(), Definition: now}
		if u.Pinned != nil {
			row.AcceptedBy, row.AcceptedAt = u.Pinned.AcceptedBy, clock(u.Pinned.AcceptedAt)
			row.Diff, _ = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(prettyJSON(u.Pinned.Definition) + "\n"), B: difflib.SplitLines(now + "\n"),
				FromFile: "accepted", ToFile: "offered now", Context: 3})
		}
		rows = append(rows, row)
	}
	return rows
}

// toolAccept accepts the definition an admin saw: POST /tools/:name/accept
// with its hash.
func (s *Office) toolAccept(c echo.Context) error {
	name := c.Param("name")
	err := s.core.Gate.AcceptTool(c.Request().Context(), name, c.FormValue("hash"), currentStaff(c).staff.Actor())
	if err != nil {
		code := fault.CodeOf(err)
		if code == fault.Internal {
			return err
		}
		v := s.toolsView(c)
		v.Error = sentence(fault.Message(err))
		return render(c, doorkit.HTTPStatus(code), views.Tools(v))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathTools, url.Values{"accepted": {name}}.Encode()))
}
