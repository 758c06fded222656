package backoffice

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// QueuePageSize is how many actions one queue page shows.
const QueuePageSize = 50

// queueQuery is a queue page's filter and page, read from the query string.
type queueQuery struct {
	form   views.QueueFilter
	filter models.ActionFilter
	page   int
	err    string
}

func parseQueueQuery(q url.Values) queueQuery {
	qq := queueQuery{page: 1}
	qq.form = views.QueueFilter{Tool: clip(q.Get("tool"), 100), Customer: clip(strings.TrimSpace(q.Get("customer")), 200),
		MinAmount: clip(strings.TrimSpace(q.Get("min_amount")), 20), MaxAmount: clip(strings.TrimSpace(q.Get("max_amount")), 20)}
	qq.filter = models.ActionFilter{Tool: qq.form.Tool, Customer: qq.form.Customer}
	amount := func(label, s string) *models.Cents {
		if s == "" {
			return nil
		}
		f, err := strconv.ParseFloat(strings.TrimPrefix(strings.ReplaceAll(s, ",", ""), "$"), 64)
		c, merr := models.CentsFrom(f)
		if err != nil || merr != nil || c < 0 {
			qq.err = fmt.Sprintf("The amount %s “%s” is not a number of dollars; write it like 45.50. It was left out of the filter.", label, s)
			return nil
		}
		return &c
	}
	qq.filter.MinAmount = amount("from", qq.form.MinAmount)
	qq.filter.MaxAmount = amount("to", qq.form.MaxAmount)
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 1 && p < 1_000_000 {
		qq.page = p
	}
	qq.filter.Offset, qq.filter.Limit = (qq.page-1)*QueuePageSize, QueuePageSize
	return qq
}

// isDefault tells the first page with no filter: the view every queue
// stream shares.
func (qq queueQuery) isDefault() bool {
	return qq.page == 1 && qq.form == views.QueueFilter{}
}

// values is the query string of the filter, with a page.
func (qq queueQuery) values(page int) url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"tool": qq.form.Tool, "customer": qq.form.Customer, "min_amount": qq.form.MinAmount, "max_amount": qq.form.MaxAmount} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

func (s *Office) queueView(ctx context.Context, qq queueQuery) (views.QueueView, error) {
	st := s.core.Store
	v := views.QueueView{Filter: qq.form, Filtered: qq.form != views.QueueFilter{}, Error: qq.err, Query: qq.values(qq.page).Encode()}
	byTool, err := st.PendingActionsByTool(ctx)
	if err != nil {
		return v, err
	}
	for _, t := range s.core.Gate.Tools().All() {
		// A read never waits unless a rule holds it: list only what can.
		if n := byTool[t.Name]; n > 0 || t.Risk != tools.RiskRead || t.Name == qq.form.Tool {
			v.ToolCounts = append(v.ToolCounts, views.ToolCount{Tool: t.Name, Count: n})
		}
	}
	for _, n := range byTool {
		v.Total += n
	}
	v.Matching = v.Total
	qq.filter.AmountArgs = map[string]string{}
	for _, t := range s.core.Gate.Tools().All() {
		if t.Amount != "" {
			qq.filter.AmountArgs[t.Name] = t.Amount
		}
	}
	if v.Filtered {
		if v.Matching, err = st.CountPendingActions(ctx, qq.filter); err != nil {
			return v, err
		}
	}
	rows, err := st.PendingActions(ctx, qq.filter)
	if err != nil {
		return v, err
	}
	v.Rows = make([]views.ActionRow, len(rows))
	for i := range rows {
		v.Rows[i] = actionRowView(&rows[i], s.summary(rows[i].Tool, rows[i].Args), s.amount(rows[i].Tool, rows[i].Args))
		v.Rows[i].RuleDescription = s.ruleDescription(rows[i].Rule)
	}
	if len(rows) > 0 {
		v.From, v.To = qq.filter.Offset+1, qq.filter.Offset+len(rows)
	}
	if qq.page > 1 {
		v.PrevURL = views.WithQuery(views.PathQueue, qq.values(qq.page-1).Encode())
	}
	if int64(qq.filter.Offset+len(rows)) < v.Matching {
		v.NextURL = views.WithQuery(views.PathQueue, qq.values(qq.page+1).Encode())
	}
	return v, nil
}

// summary is what a call asks for, in words (the tool's summary).
func (s *Office) summary(tool, args string) string {
	if t, ok := s.core.Gate.Tools().Get(tool); ok {
		return t.Summarize(args)
	}
	return tool
}

// ruleDescription is what a rule of the policy in force says of itself
// ("" for a rule it does not have, or a Go policy).
func (s *Office) ruleDescription(rule string) string {
	if fp, ok := s.core.Gate.Policy().(*policy.FilePolicy); ok {
		return fp.Describe(rule)
	}
	return ""
}

// heldUnder is what the rule that held a call says of itself, in the
// policy version that held it, and, when another version is in force now,
// a word that says so: a waiting action shows the words it was held by,
// not a later version's.
func (s *Office) heldUnder(ctx context.Context, call *models.ToolCall) (description, note string) {
	now := s.core.Gate.Policy().Version()
	if call.PolicyVersion == "" || call.PolicyVersion == now {
		return s.ruleDescription(call.Rule), ""
	}
	note = "Held under policy version " + tools.Truncate(call.PolicyVersion, 12) + ", since replaced by " + tools.Truncate(now, 12) + "."
	if p := s.policyOf(ctx, call.PolicyVersion); p != nil {
		return p.Describe(call.Rule), note + " Its rule is shown as that version words it."
	}
	return "", note + " That version's text is not kept here, so its rule's words cannot be shown."
}

// policyOf is a kept policy version, loaded against the tools in force
// (nil when it is not kept or no longer loads); versions never change, so
// each is loaded once.
func (s *Office) policyOf(ctx context.Context, hash string) *policy.FilePolicy {
	if p, ok := s.oldPolicies.Load(hash); ok {
		fp, _ := p.(*policy.FilePolicy)
		return fp
	}
	var fp *policy.FilePolicy
	if v, err := s.core.Store.PolicyVersionByHash(ctx, hash); err == nil {
		if p, err := policy.LoadPolicy([]byte(v.YAML), "version "+tools.Truncate(hash, 12), s.core.Gate.Tools()); err == nil {
			fp = p
		}
	}
	s.oldPolicies.Store(hash, fp)
	return fp
}

// callSummary is summary for a recorded call: one whose arguments were
// refused (an invalid call keeps none) is named by its tool and why, not as
// a phrase with its blanks unfilled.
func (s *Office) callSummary(c *models.ToolCall) string {
	if c.Args == "" && c.Status == models.CallInvalid {
		why := strings.TrimSuffix(tools.Truncate(c.Error, 120), ".")
		if why == "" {
			return c.Tool + " (invalid call)"
		}
		return c.Tool + " (invalid call: " + why + ")"
	}
	return s.summary(c.Tool, c.Args)
}

// amount shows the sum of money a call is about, when its tool has one.
func (s *Office) amount(tool, args string) string {
	if t, ok := s.core.Gate.Tools().Get(tool); ok {
		if c, ok := t.AmountOf(args); ok {
			return c.String()
		}
	}
	return ""
}

func (s *Office) renderQueueBody(ctx context.Context, qq queueQuery) ([]byte, error) {
	v, err := s.queueView(ctx, qq)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := views.QueueBody(v).Render(ctx, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// renderQueueRows renders the shared view once for every open queue stream.
func (s *Office) renderQueueRows(ctx context.Context) ([]byte, error) {
	return s.renderQueueBody(ctx, parseQueueQuery(nil))
}

func (s *Office) queuePage(c echo.Context) error {
	v, err := s.queueView(c.Request().Context(), parseQueueQuery(c.QueryParams()))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Queue(v))
}

// queueEvents streams the queue rows whenever an action changes.
//
// The first page with no filter is rendered once for every stream; a
// filtered or later page renders its own view when the queue changes.
func (s *Office) queueEvents(c echo.Context) error {
	ch, stop := s.changes.queue.SubscribeQueue()
	defer stop()
	qq := parseQueueQuery(c.QueryParams())
	own := func(shared []byte) []byte {
		if qq.isDefault() {
			return shared
		}
		html, err := s.renderQueueBody(c.Request().Context(), qq)
		if err != nil {
			return nil
		}
		return html
	}
	w := doorkit.StartSSE(c)
	ctx := c.Request().Context()
	write := func(html []byte) bool {
		if _, err := w.Write(doorkit.SSEData("queue", html)); err != nil {
			return false
		}
		w.Flush()
		return true
	}
	// A fresh render first: the page may be older than the stream.
	if html, err := s.renderQueueBody(ctx, qq); err == nil && !write(html) {
		return nil
	}
	doorkit.Follow(ctx, w, ch, func(shared []byte) bool {
		html := own(shared)
		return html == nil || write(html)
	})
	return nil
}
