package backoffice

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// AuditPageSize is the rows of one audit page.
const AuditPageSize = 50

var (
	auditDecisions = []string{models.DecidedAllow, models.DecidedNeedsApproval, models.DecidedDeny, "none"}
)

// auditFilter reads and checks the filter from the query string. A field
// that cannot be read is an invalid error (exports answer 400); the page
// says so and shows the rest (auditPage).
func auditFilter(qs url.Values) (views.AuditFilter, models.AuditQuery, error) {
	f := views.AuditFilter{Tool: qs.Get("tool"), Decision: qs.Get("decision"), Status: qs.Get("status"),
		Staff: strings.TrimSpace(qs.Get("staff")), Customer: strings.TrimSpace(qs.Get("customer")),
		From: qs.Get("from"), To: qs.Get("to"), Text: qs.Get("q"), DecisionsOnly: qs.Get("only") == "decisions"}
	q := models.AuditQuery{Tool: f.Tool, Decision: f.Decision, Status: models.CallStatus(f.Status), Staff: f.Staff, Customer: f.Customer, Text: f.Text,
		DecisionsOnly: f.DecisionsOnly}
	if f.Decision != "" && !contains(auditDecisions, f.Decision) {
		return f, q, fault.Errorf(fault.Invalid, "unknown decision %q", f.Decision)
	}
	if f.Status != "" && !models.CallStatus(f.Status).Valid() {
		return f, q, fault.Errorf(fault.Invalid, "unknown status %q", f.Status)
	}
	for _, d := range []struct {
		s   string
		dst *time.Time
		add time.Duration
	}{{f.From, &q.From, 0}, {f.To, &q.To, 24 * time.Hour}} {
		if d.s == "" {
			continue
		}
		t, err := time.Parse("2006-01-02", d.s)
		if err != nil {
			return f, q, fault.Errorf(fault.Invalid, "“%s” is not a date: pick one in the calendar, or write it as 2026-11-30", d.s)
		}
		*d.dst = t.Add(d.add) // "to" includes the whole day
	}
	if cur := qs.Get("after"); cur != "" {
		ts, id, ok := strings.Cut(cur, "|")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			return f, q, fault.Errorf(fault.Invalid, "the page cursor is not valid")
		}
		q.BeforeCreated, q.BeforeID = t, id
	}
	return f, q, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func filterQuery(f views.AuditFilter) string {
	v := url.Values{}
	for k, val := range map[string]string{"tool": f.Tool, "decision": f.Decision, "status": f.Status, "staff": f.Staff,
		"customer": f.Customer, "from": f.From, "to": f.To, "q": f.Text} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if f.DecisionsOnly {
		v.Set("only", "decisions")
	}
	return v.Encode()
}

func (s *Office) auditPage(c echo.Context) error {
	f, q, err := auditFilter(c.QueryParams())
	filterError := ""
	if fault.CodeOf(err) == fault.Invalid {
		// Say what is wrong, keep what was typed in the form, and show the
		// calls without the parts that could not be read.
		filterError = sentence(fault.Message(err))
		typed := f
		rest := url.Values{}
		for k, v := range c.QueryParams() {
			rest[k] = v
		}
		for _, k := range []string{"from", "to", "decision", "status", "after"} {
			rest.Del(k)
		}
		if f, q, err = auditFilter(rest); err != nil {
			return err
		}
		f.From, f.To = typed.From, typed.To
	} else if err != nil {
		return err
	}
	q.Limit = AuditPageSize + 1
	ctx := c.Request().Context()
	if q.Text != "" {
		// A text search reads calls until it has a page of matches: with a
		// rare match and a long history, that is the whole history.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.AuditSearchTimeout)
		defer cancel()
	}
	v := views.AuditView{Filter: f, Query: filterQuery(f), Decisions: auditDecisions, Statuses: names(models.CallStatuses), FilterError: filterError}
	for _, t := range s.core.Gate.Tools().All() {
		v.Tools = append(v.Tools, t.Name)
	}
	rows, err := s.core.Store.AuditCalls(ctx, q)
	if err != nil {
		if q.Text == "" || ctx.Err() == nil || c.Request().Context().Err() != nil {
			return err
		}
		v.SearchStopped = fmt.Sprintf("The search read for %s without finding a page of matches, and stopped. Choose a tool, a customer or dates to narrow it.",
			s.cfg.AuditSearchTimeout.Round(time.Second))
		rows = nil
	}
	if len(rows) > AuditPageSize {
		last := rows[AuditPageSize-1]
		v.Next = url.QueryEscape(last.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + last.ID)
		rows = rows[:AuditPageSize]
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	seen, err := s.core.Store.SeenBy(ctx, ids)
	if err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		args := r.Args
		if args == "" {
			args = r.RawArgs
		}
		row := views.AuditRow{ID: r.ID, At: clock(r.CreatedAt), Run: r.RunID, Customer: customerLabel(r.CustomerID, r.CustomerName),
			Tool: r.Tool, Args: tools.Truncate(args, 300), Decision: decisionWords(r.Decision), Why: whyDecided(&r.ToolCall), Status: string(r.Status), DecidedBy: r.DecidedBy}
		for _, a := range seen[r.ID] {
			sv := views.SeenView{Staff: a.StaffName}
			for _, f := range models.DecodeFacts(a.Seen) {
				sv.Facts = append(sv.Facts, views.ContextFact{Label: f.Label, Value: f.Value})
			}
			row.Seen = append(row.Seen, sv)
		}
		v.Rows = append(v.Rows, row)
	}
	v.ChainOK, v.ChainChecked, v.ChainText = s.chainStatus(c)
	return render(c, http.StatusOK, views.Audit(v))
}

// auditChainStatus is the audit page's chain check alone, which the page
// asks for until the first verification has finished.
func (s *Office) auditChainStatus(c echo.Context) error {
	ok, checked, text := s.chainStatus(c)
	return render(c, http.StatusOK, views.ChainStatus(ok, checked, text))
}

// decisionWords is a call's decision as the audit table shows it: a call
// refused before any decision (an invalid one) says so.
func decisionWords(decision string) string {
	if decision == "" {
		return "not decided"
	}
	return decision
}

// whyDecided is the rule and its reason, or why a call that was never
// decided was refused.
func whyDecided(c *models.ToolCall) string {
	switch {
	case c.Rule != "" && c.Reason != "":
		return c.Rule + ": " + c.Reason
	case c.Rule != "":
		return c.Rule
	case c.Decision == "" && c.Error != "":
		return tools.Truncate(c.Error, 200)
	}
	return c.Reason
}

// chainStatus reports the last verification of the audit chain. Verifying
// reads every event, so it runs in the background at most every five
// minutes and the page never waits for it.
func (s *Office) chainStatus(c echo.Context) (ok, checked bool, text string) {
	s.chainMu.Lock()
	defer s.chainMu.Unlock()
	if !s.chainRunning && time.Since(s.chainAt) > 5*time.Minute {
		select {
		case s.chainWanted <- struct{}{}:
			s.chainRunning = true
		default: // asked already
		}
	}
	if s.chainAt.IsZero() {
		return false, false, "audit chain: first verification running…"
	}
	return s.chainOK, true, s.chainText + " (checked " + s.chainAt.UTC().Format("15:04:05 UTC") + ")"
}

// checkChain is the core's job that verifies the audit chain when the
// audit page asks (chainStatus), until ctx ends.
func (s *Office) checkChain(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.chainWanted:
			s.verifyChain(ctx)
		}
	}
}

func (s *Office) verifyChain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep, err := s.core.Store.VerifyAuditChain(ctx)
	s.chainMu.Lock()
	defer s.chainMu.Unlock()
	switch {
	case err != nil:
		s.chainOK, s.chainText = false, "audit chain could not be checked"
	case rep.OK:
		s.chainOK, s.chainText = true, fmt.Sprintf("audit chain intact: %d events", rep.Events)
	default:
		s.chainOK, s.chainText = false, fmt.Sprintf("audit chain BROKEN at %s: %s", models.EventName(rep.BadChain, rep.BadSeq), rep.Problem)
	}
	s.chainAt, s.chainRunning = time.Now(), false
}

type exportRow struct {
	ID            string          `json:"id"`
	CreatedAt     time.Time       `json:"created_at"`
	RunID         string          `json:"run_id"`
	CustomerID    string          `json:"customer_id"`
	Tool          string          `json:"tool"`
	RawArgs       string          `json:"raw_args"`
	Args          json.RawMessage `json:"args"`
	ArgsHash      string          `json:"args_hash"`
	OriginalArgs  json.RawMessage `json:"original_args,omitempty"`
	Decision      string          `json:"decision"`
	Rule          string          `json:"rule"`
	Reason        string          `json:"reason"`
	PolicyVersion string          `json:"policy_version"`
	Status        string          `json:"status"`
	DecidedBy     string          `json:"decided_by"`
	Error         string          `json:"error"`
}

func toExport(r *models.AuditRow) exportRow {
	e := exportRow{ID: r.ID, CreatedAt: r.CreatedAt.UTC(), RunID: r.RunID, CustomerID: r.CustomerID, Tool: r.Tool, RawArgs: r.RawArgs,
		ArgsHash: r.ArgsHash, Decision: r.Decision, Rule: r.Rule, Reason: r.Reason, PolicyVersion: r.PolicyVersion, Status: string(r.Status),
		DecidedBy: r.DecidedBy, Error: r.Error}
	if r.Args != "" {
		e.Args = json.RawMessage(r.Args)
	} else {
		e.Args = json.RawMessage("null")
	}
	if r.OriginalArgs != "" {
		e.OriginalArgs = json.RawMessage(r.OriginalArgs)
	}
	return e
}

// chainLine is one audit event as the chain export writes it: every field
// the hash covers, as stored, so that anyone can recompute the chain (the
// README gives the recipe). The payload stays a string: its exact bytes are
// hashed.
type chainLine struct {
	Chain    int64  `json:"chain,omitempty"`
	Seq      int64  `json:"seq"`
	At       string `json:"at"`
	Actor    string `json:"actor"`
	Kind     string `json:"kind"`
	Subject  string `json:"subject"`
	Payload  string `json:"payload"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// auditChainExport streams the whole audit chain as JSON Lines, for keeping
// outside Countersign and checking without it.
func (s *Office) auditChainExport(c echo.Context) error {
	w := c.Response()
	doorkit.LongWrite(c)
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="countersign-audit-chain-`+time.Now().UTC().Format("20060102-150405")+`.jsonl"`)
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	n := 0
	err := s.core.Store.EachAuditEvent(c.Request().Context(), func(e *models.AuditEvent) error {
		if err := enc.Encode(chainLine{Chain: e.Chain, Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339Nano), Actor: e.Actor, Kind: string(e.Kind),
			Subject: e.Subject, Payload: e.Payload, PrevHash: e.PrevHash, Hash: e.Hash}); err != nil {
			return err
		}
		if n++; n%500 == 0 {
			w.Flush()
		}
		return nil
	})
	w.Flush()
	if err != nil {
		// The status line is gone; the log and a short file tell the truth.
		s.cfg.Log.Error("audit chain export stopped", "err", err, "events", n)
	}
	return nil
}

// auditExport streams the filtered set as CSV or JSON Lines.
// MaxEvidenceExport bounds the bundles one export carries: narrow the
// filter for more.
const MaxEvidenceExport = 500

func (s *Office) auditExport(c echo.Context) error {
	_, q, err := auditFilter(c.QueryParams())
	if err != nil {
		return err
	}
	format := c.Param("format")
	w := c.Response()
	doorkit.LongWrite(c)
	name := "countersign-audit-" + time.Now().UTC().Format("20060102-150405")
	switch format {
	case "csv":
		w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`.csv"`)
		w.WriteHeader(http.StatusOK)
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"id", "created_at", "run_id", "customer_id", "tool", "args", "args_hash", "original_args", "decision", "rule", "reason", "policy_version", "status", "decided_by", "error"})
		n := 0
		err = s.core.Store.EachAuditCall(c.Request().Context(), q, func(r *models.AuditRow) error {
			e := toExport(r)
			if err := cw.Write(csvRow(e.ID, e.CreatedAt.Format(time.RFC3339Nano), e.RunID, e.CustomerID, e.Tool, string(e.Args), e.ArgsHash,
				string(e.OriginalArgs), e.Decision, e.Rule, e.Reason, e.PolicyVersion, e.Status, e.DecidedBy, e.Error)); err != nil {
				return err
			}
			if n++; n%500 == 0 {
				cw.Flush()
			}
			return nil
		})
		cw.Flush()
	case "jsonl":
		w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`.jsonl"`)
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		err = s.core.Store.EachAuditCall(c.Request().Context(), q, func(r *models.AuditRow) error {
			return enc.Encode(toExport(r))
		})
	case "evidence":
		var ids []string
		err = s.core.Store.EachAuditCall(c.Request().Context(), q, func(r *models.AuditRow) error {
			if models.CallStatus(r.Status).Final() && len(ids) < MaxEvidenceExport {
				ids = append(ids, r.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`-evidence.jsonl"`)
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, id := range ids {
			b, berr := s.core.Evidence(c.Request().Context(), id)
			if berr != nil {
				err = berr
				break
			}
			if err = enc.Encode(b); err != nil {
				break
			}
		}
	default:
		return fault.Errorf(fault.NotFound, "export as csv, jsonl or evidence")
	}
	if err != nil {
		s.cfg.Log.Error("audit export stopped", "err", err)
	}
	return nil
}

// csvRow neutralizes every cell: a customer id comes from a shop's token, a
// tool name from the model, and any of them may start like a formula.
func csvRow(cells ...string) []string {
	for i, c := range cells {
		cells[i] = csvSafe(c)
	}
	return cells
}

// csvSafe keeps spreadsheet programs from running a cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsAny(s[:1], "=+-@\t\r") {
		return "'" + s
	}
	return s
}
