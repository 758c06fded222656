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
// no summary it is the tool's title and its first arguments as the call
// wrote them ("Write file: path /notes.txt, content hello").
func (t *Tool) Summarize(args string) string {
	if t.Summary == "" {
		return plainSummary(t.Title(), args)
	}
	return fill(t.Summary, args)
}

// Title is what people call the tool: the title its MCP server listed (an
// outside string, so cut to 80 characters on one line), or else its name in
// words ("fs__write_file" reads "Write file").
func (t *Tool) Title() string {
	var l struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
	}
	_ = json.Unmarshal(t.Listing, &l)
	for _, s := range []string{l.Title, l.Annotations.Title} {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			return Truncate(s, 80)
		}
	}
	name := t.Name
	if t.Upstream != "" {
		name = strings.TrimPrefix(name, t.Upstream+"__")
	}
	words := strings.Join(strings.Fields(strings.ReplaceAll(name, "_", " ")), " ")
	if words == "" {
		return t.Name
	}
	return strings.ToUpper(words[:1]) + words[1:]
}

// plainSummary is a title and the first three top-level arguments of a
// call (JSON), in the order the call wrote them, each cut short.
func plainSummary(title, args string) string {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return title
	}
	var parts []string
	for dec.More() && len(parts) < 3 {
		key, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		k, _ := key.(string)
		parts = append(parts, Truncate(k, 40)+" "+Truncate(strings.Join(strings.Fields(s), " "), 40))
	}
	if len(parts) == 0 {
		return title
	}
	return title + ": " + strings.Join(parts, ", ")
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
