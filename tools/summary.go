package tools

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/countersign/countersign/models"
)

// A summary is the one line that says what a call asks for, in words, for
// approvers and customers: "Refund {amount:money} on order {order_id}".
// {field} takes a top-level argument as written; {field:money} formats a
// number as dollars ($1,200.00). A missing argument reads "?".

var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(:money)?\}`)

// Summarize fills the tool's summary with the call's arguments (JSON); with
// no summary it is the tool's name.
func (t *Tool) Summarize(args string) string {
	if t.Summary == "" {
		return t.Name
	}
	return fill(t.Summary, args)
}

// DescribeRequest fills the tool's customer phrase with the call's
// arguments (JSON): what a customer reads while a person reviews the call.
func (t *Tool) DescribeRequest(args string) string {
	if t.Request == "" {
		return "your request (" + strings.ReplaceAll(t.Name, "_", " ") + ")"
	}
	return fill(t.Request, args)
}

// AmountOf reads the call's sum of money (the argument Amount names, in
// dollars) from its arguments (JSON), in cents.
func (t *Tool) AmountOf(args string) (models.Cents, bool) {
	if t.Amount == "" {
		return 0, false
	}
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		return 0, false
	}
	f, ok := m[t.Amount].(float64)
	if !ok {
		return 0, false
	}
	c, err := models.CentsFrom(f)
	return c, err == nil
}

// fill replaces a phrase's placeholders with the arguments (JSON).
func fill(phrase, args string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(args), &m)
	return placeholder.ReplaceAllStringFunc(phrase, func(ph string) string {
		parts := placeholder.FindStringSubmatch(ph)
		v, ok := m[parts[1]]
		if !ok || v == nil {
			return "?"
		}
		if parts[2] == ":money" {
			if f, ok := v.(float64); ok {
				if c, err := models.CentsFrom(f); err == nil {
					return c.String()
				}
			}
		}
		switch x := v.(type) {
		case string:
			return strings.Join(strings.Fields(x), " ")
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
}
