package backoffice

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Conversions from records to the small structs views take.

func prettyJSON(s string) string {
	if s == "" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return b.String()
}

// argChanges lists the arguments whose values differ between what the model
// asked for and what is in force after an edit, by top-level field.
func argChanges(original, current string) []views.ArgChange {
	if original == "" || current == "" {
		return nil
	}
	var was, now map[string]json.RawMessage
	if json.Unmarshal([]byte(original), &was) != nil || json.Unmarshal([]byte(current), &now) != nil {
		return nil
	}
	fields := make([]string, 0, len(was)+len(now))
	for k := range was {
		fields = append(fields, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	var out []views.ArgChange
	for _, k := range fields {
		a, b := compactJSON(was[k]), compactJSON(now[k])
		if a != b {
			out = append(out, views.ArgChange{Field: k, Was: a, Now: b})
		}
	}
	return out
}

func compactJSON(v json.RawMessage) string {
	if v == nil {
		return "(not set)"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func customerLabel(id, name string) string {
	switch {
	case id == "":
		return "anonymous"
	case name == "":
		return id
	}
	return name + " (" + id + ")"
}

func actionRowView(r *models.ActionRow, summary, amount string) views.ActionRow {
	name := r.CustomerName
	if name == "" {
		name = customerLabel(r.CustomerID, "")
	}
	v := views.ActionRow{Agent: strings.TrimPrefix(r.Agent, "agent:"), ID: r.ID, Tool: r.Tool, Risk: r.Risk, Reason: r.Reason, Customer: name, CustomerID: r.CustomerID, Summary: summary,
		Amount: amount, CreatedAt: rfc3339(r.CreatedAt), Approvals: r.Approvals, Required: r.RequiredApprovals, RequiredRole: string(r.RequiredRole),
		Overdue: r.OverdueAt != nil}
	if r.ExpiresAt != nil {
		v.ExpiresAt = rfc3339(*r.ExpiresAt)
	}
	return v
}

func callView(c *models.ToolCall) views.CallView {
	args := c.Args
	if args == "" {
		args = c.RawArgs
	}
	return views.CallView{ID: c.ID, Tool: c.Tool, Args: args, Status: string(c.Status), Verdict: c.Decision, Reason: c.Reason, Rule: c.Rule}
}

func turnsView(turns []models.Turn, calls []models.ToolCall) []views.TurnView {
	out := make([]views.TurnView, 0, len(turns))
	for _, t := range turns {
		tv := views.TurnView{Seq: t.Seq, Role: t.Role, Text: t.Text, At: clock(t.CreatedAt)}
		if t.Role == models.RoleAssistant {
			for i := range calls {
				if calls[i].TurnID == t.ID {
					tv.Calls = append(tv.Calls, callView(&calls[i]))
				}
			}
		}
		if t.Role == models.RoleTool {
			continue // results are shown on the call; the text is for the model
		}
		out = append(out, tv)
	}
	return out
}

type schemaProp struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Description      string   `json:"description"`
	MultipleOf       *float64 `json:"multipleOf"`
	Minimum          *float64 `json:"minimum"`
	ExclusiveMinimum *float64 `json:"exclusiveMinimum"`
	Maximum          *float64 `json:"maximum"`
}

// fieldLabel is what a person reads beside an input: the schema's title, or
// the argument's name in words ("order_id" reads "Order ID").
func fieldLabel(name string, p schemaProp) string {
	if p.Title != "" {
		return p.Title
	}
	words := strings.Split(name, "_")
	for i, w := range words {
		switch {
		case w == "id" || w == "url":
			words[i] = strings.ToUpper(w)
		case i == 0 && w != "":
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

type schemaDoc struct {
	Properties map[string]schemaProp `json:"properties"`
	Required   []string              `json:"required"`
}

// editFields builds the edit form from the tool's JSON Schema and the
// arguments in force.
func editFields(schema json.RawMessage, args string, errs map[string]string) []views.FieldView {
	var doc schemaDoc
	_ = json.Unmarshal(schema, &doc)
	var current map[string]any
	_ = json.Unmarshal([]byte(args), &current)
	required := map[string]bool{}
	for _, r := range doc.Required {
		required[r] = true
	}
	names := make([]string, 0, len(doc.Properties))
	for n := range doc.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []views.FieldView
	for _, n := range names {
		p := doc.Properties[n]
		f := views.FieldView{Name: n, Label: fieldLabel(n, p), Type: "text", Required: required[n], Description: p.Description, Error: errs[n]}
		switch p.Type {
		case "number", "integer":
			f.Type, f.Step = "number", "any"
			if p.Type == "integer" {
				f.Step = "1"
			} else if p.MultipleOf != nil {
				f.Step = strconv.FormatFloat(*p.MultipleOf, 'f', -1, 64)
			}
			num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
			switch {
			case p.Minimum != nil:
				f.Min = num(*p.Minimum)
			case p.ExclusiveMinimum != nil && p.MultipleOf != nil:
				f.Min = num(*p.ExclusiveMinimum + *p.MultipleOf)
			}
			if p.Maximum != nil {
				f.Max = num(*p.Maximum)
			}
			if strings.Contains(strings.ToLower(p.Description), "dollars") {
				f.Currency = "$"
			}
		}
		if v, ok := current[n]; ok {
			switch x := v.(type) {
			case string:
				f.Value = x
			case float64:
				f.Value = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				b, _ := json.Marshal(x)
				f.Value = string(b)
			}
		}
		out = append(out, f)
	}
	return out
}

// argsFromForm turns the edit form back into arguments, typed by the schema.
func argsFromForm(schema json.RawMessage, value func(string) string) ([]byte, map[string]string) {
	var doc schemaDoc
	_ = json.Unmarshal(schema, &doc)
	args := map[string]any{}
	errs := map[string]string{}
	for n, p := range doc.Properties {
		raw := value("arg." + n)
		if raw == "" {
			continue
		}
		switch p.Type {
		case "number":
			f, err := strconv.ParseFloat(raw, 64)
			if err != nil {
				errs[n] = "must be a number"
				continue
			}
			args[n] = f
		case "integer":
			i, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				errs[n] = "must be a whole number"
				continue
			}
			args[n] = i
		default:
			args[n] = raw
		}
	}
	b, _ := json.Marshal(args)
	return b, errs
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sentence is doorkit.Sentence.
var sentence = doorkit.Sentence

// names lists the words of a typed list (statuses, roles) for a view.
func names[T ~string](list []T) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = string(x)
	}
	return out
}
