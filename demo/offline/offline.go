// Package offline is the demo shop's own model: scripted, with no network
// and no key, it turns plain requests about the demo's orders into calls of
// the demo's tools and answers from their results. It belongs to the demo,
// like demo/shop; Countersign reaches it only as an llm.Model.
package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Model is a deterministic support agent for the demo shop. It needs no
// network and no key: it reads plain requests, turns them into real tool
// calls through the gate, and writes its replies from the tool results.
// It never retries a call that was rejected, denied or expired.
type Model struct{}

var (
	reOrderID = regexp.MustCompile(`(?i)\b([a-z][0-9]{4,10})\b`)
	// An amount with what is around it: a sign before or after the $, and
	// whatever digits, commas and dots follow, so that parseAmount can
	// refuse what it cannot read rather than keep part of it.
	reAmount  = regexp.MustCompile(`(?i)(?:(-|\bminus\s+)?\s?\$\s?(-)?([0-9][0-9.,]*))|(?:(-|\bminus\s+)?\b([0-9][0-9.,]*)\s*(?:dollars|usd|bucks)\b)`)
	reMoney   = regexp.MustCompile(`^(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]{1,2})?$`)
	reBecause = regexp.MustCompile(`(?i)\b(?:because|as|since)\s+(.+)$`)
	reAddress = regexp.MustCompile(`(?i)\b(?:send|ship|deliver|change\s+(?:the\s+)?(?:shipping\s+)?address\s+(?:of|for)|update\s+(?:the\s+)?address\s+(?:of|for))\b.*?\bto\s+(.+)$`)
	// A sentence ends at a full stop followed by a space (or the end), so
	// "$45.50" stays whole.
	reSplit  = regexp.MustCompile(`[!?;\n]+\s*|\.+(?:\s+|$)`)
	reGreet  = regexp.MustCompile(`(?i)^\s*(hi|hello|hey|good\s+(morning|afternoon|evening)|howdy)\b`)
	reThanks = regexp.MustCompile(`(?i)\b(thanks|thank you|cheers)\b`)
	reList   = regexp.MustCompile(`(?i)\b(my orders|list (my )?orders|what (are|were) my orders|which orders|orders do i have|what did i order|all (of )?my orders)\b`)
	reStatus = regexp.MustCompile(`(?i)\b(where|status|track|tracking|arrive|arrived|when will|shipped|delivered|how is)\b`)
	reRefund = regexp.MustCompile(`(?i)\b(refund|money back|reimburse)`)
	reCancel = regexp.MustCompile(`(?i)\bcancel`)
	reIntent = regexp.MustCompile(`(?i)\b(refund|cancel|send|ship|deliver|where|what|status|track|change|update|list)\b`)
)

// Next implements llm.Model.
func (Model) Next(_ context.Context, req llm.Request) (llm.Reply, error) {
	// Everything after the last assistant turn is what to answer: results of
	// its calls, then any customer messages.
	start := 0
	for i := len(req.Turns) - 1; i >= 0; i-- {
		if req.Turns[i].Role == models.RoleAssistant {
			start = i + 1
			break
		}
	}
	var lines []string
	var calls []llm.Call
	for _, t := range req.Turns[start:] {
		switch t.Role {
		case models.RoleTool:
			if t.Result != nil {
				lines = append(lines, describeResult(t.Result))
			}
		case models.RoleCustomer:
			for _, part := range splitRequests(t.Text) {
				reply, call := understand(part)
				if reply != "" {
					lines = append(lines, reply)
				}
				if call != nil {
					call.ID = fmt.Sprintf("call_%d", len(calls)+1)
					calls = append(calls, *call)
				}
			}
		}
	}
	if len(lines) == 0 && len(calls) == 0 {
		lines = append(lines, "How can I help with your orders?")
	}
	return llm.Reply{Text: strings.Join(dedupeLines(lines), " "), Calls: calls}, nil
}

func dedupeLines(lines []string) []string {
	seen := map[string]bool{}
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// splitRequests cuts a message into requests: sentences, and "and" when
// what follows asks for something too ("where is A1002 and refund $20").
func splitRequests(text string) []string {
	var out []string
	for _, s := range reSplit.Split(text, -1) {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		parts := strings.Split(s, " and ")
		cur := parts[0]
		for _, p := range parts[1:] {
			if reIntent.MatchString(p) && !reBecause.MatchString(cur) && !reAddress.MatchString(cur) {
				out = append(out, cur)
				cur = p
			} else {
				cur += " and " + p
			}
		}
		out = append(out, cur)
	}
	return out
}

type amountProblem int

const (
	amountOK amountProblem = iota
	amountMissing
	amountNegative
	amountMalformed
)

// parseAmount reads the dollar amount of a request. A minus sign is never
// dropped, and "$12.345" or "$1,2,3" is not read as something else.
func parseAmount(text string) (float64, amountProblem) {
	m := reAmount.FindStringSubmatch(text)
	if m == nil {
		return 0, amountMissing
	}
	negative := m[1] != "" || m[2] != "" || m[4] != ""
	num := m[3]
	if num == "" {
		num = m[5]
	}
	num = strings.TrimRight(num, ".,") // the end of a sentence or a list
	if negative {
		return 0, amountNegative
	}
	if !reMoney.MatchString(num) {
		return 0, amountMalformed
	}
	amount, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil {
		return 0, amountMalformed
	}
	if amount <= 0 {
		return 0, amountNegative
	}
	return amount, amountOK
}

func call(tool string, args map[string]any) *llm.Call {
	b, _ := json.Marshal(args)
	return &llm.Call{Tool: tool, Args: b}
}

// understand reads one request: a reply, a tool call, or both.
func understand(text string) (string, *llm.Call) {
	orderID := ""
	if m := reOrderID.FindStringSubmatch(text); m != nil {
		orderID = strings.ToUpper(m[1])
	}
	switch {
	case reRefund.MatchString(text):
		if orderID == "" {
			return "Which order should the refund go to? Please give the order number (for example A1001).", nil
		}
		amount, problem := parseAmount(text)
		switch problem {
		case amountMissing:
			return fmt.Sprintf("How much should I refund on order %s?", orderID), nil
		case amountNegative:
			return fmt.Sprintf("A refund must be more than $0.00. How much should I refund on order %s?", orderID), nil
		case amountMalformed:
			return fmt.Sprintf("I couldn't read that amount. How much should I refund on order %s? Write it like $45.50.", orderID), nil
		}
		args := map[string]any{"order_id": orderID, "amount": amount}
		if r := reBecause.FindStringSubmatch(text); r != nil {
			args["reason"] = tools.Truncate(strings.TrimSpace(r[1]), 400)
		}
		return "", call("issue_refund", args)
	case reCancel.MatchString(text):
		if orderID == "" {
			return "Which order would you like to cancel? Please give the order number.", nil
		}
		args := map[string]any{"order_id": orderID}
		if r := reBecause.FindStringSubmatch(text); r != nil {
			args["reason"] = tools.Truncate(strings.TrimSpace(r[1]), 400)
		}
		return "", call("cancel_order", args)
	case reAddress.MatchString(text) && orderID != "":
		addr := strings.TrimSpace(reAddress.FindStringSubmatch(text)[1])
		return "", call("update_shipping_address", map[string]any{"order_id": orderID, "address": tools.Truncate(addr, 300)})
	case reList.MatchString(text):
		return "", call("list_orders", map[string]any{})
	case orderID != "" && (reStatus.MatchString(text) || len(strings.Fields(text)) <= 4):
		return "", call("get_order_status", map[string]any{"order_id": orderID})
	case reGreet.MatchString(text):
		return "Hello! I can check your orders, change a shipping address, cancel an order that hasn't shipped, or help with a refund.", nil
	case reThanks.MatchString(text):
		return "You're welcome! Anything else I can help with?", nil
	}
	return "Sorry, I didn't catch that. I can check an order (\"where is my order A1001?\"), list your orders, change a shipping address, cancel an order or help with a refund.", nil
}

func statusPhrase(status string) string {
	switch status {
	case shop.OrderProcessing:
		return "is being prepared"
	case shop.OrderShipped:
		return "is on its way"
	case shop.OrderDelivered:
		return "was delivered"
	case shop.OrderCancelled:
		return "was cancelled"
	}
	return "is " + status
}

// describeResult turns a tool result into a sentence for the customer.
func describeResult(r *llm.ToolResult) string {
	switch r.Status {
	case models.CallSucceeded:
	case models.CallRejected:
		reason := strings.TrimPrefix(r.Error, "rejected by staff: ")
		return fmt.Sprintf("I'm sorry: a team member declined %s. Their reason: %s", requestNoun(r), ensureStop(reason))
	case models.CallExpired:
		return fmt.Sprintf("I'm sorry: nobody could review %s in time, so nothing was done. You can ask again if you still need it.", requestNoun(r))
	case models.CallDenied:
		return "I can't do that: " + ensureStop(r.Error)
	case models.CallCancelled:
		return fmt.Sprintf("%s was withdrawn, so nothing was done.", capitalize(requestNoun(r)))
	case models.CallUnknown:
		return fmt.Sprintf("I'm not sure whether %s went through; a team member will check and get back to you.", requestNoun(r))
	case models.CallInvalidated:
		return fmt.Sprintf("%s was approved, but something changed before it could run, so nothing was done. You can ask again if you still need it.", capitalize(requestNoun(r)))
	case models.CallInvalid:
		if strings.Contains(r.Error, "signed-in customer") {
			return "Please sign in to the shop first; then I can look after your orders here."
		}
		return "I couldn't do that: " + ensureStop(r.Error)
	default:
		return "That didn't work: " + ensureStop(r.Error)
	}
	switch r.Tool {
	case "get_order_status":
		var o shop.OrderView
		_ = json.Unmarshal(r.Output, &o)
		s := fmt.Sprintf("Order %s (%s, %s) %s.", o.OrderID, o.Items, o.Total, statusPhrase(o.Status))
		if o.Refunded != "" && o.Refunded != "$0.00" {
			s += fmt.Sprintf(" %s has been refunded on it.", o.Refunded)
		}
		return s
	case "list_orders":
		var out struct {
			Orders []shop.OrderView `json:"orders"`
		}
		_ = json.Unmarshal(r.Output, &out)
		if len(out.Orders) == 0 {
			return "You have no orders with us yet."
		}
		var parts []string
		for _, o := range out.Orders {
			parts = append(parts, fmt.Sprintf("%s (%s, %s) %s", o.OrderID, o.Items, o.Total, statusPhrase(o.Status)))
		}
		if len(out.Orders) == 1 {
			return fmt.Sprintf("You have 1 order: %s.", parts[0])
		}
		return fmt.Sprintf("You have %d orders: %s.", len(out.Orders), strings.Join(parts, "; "))
	case "update_shipping_address":
		var o shop.OrderView
		_ = json.Unmarshal(r.Output, &o)
		return fmt.Sprintf("Done: order %s will go to %s.", o.OrderID, o.ShippingAddress)
	case "cancel_order":
		var out struct {
			Order    shop.OrderView `json:"order"`
			Refunded string         `json:"refunded"`
		}
		_ = json.Unmarshal(r.Output, &out)
		if out.Refunded != "" {
			return fmt.Sprintf("Order %s is cancelled, and %s is on its way back to you.", out.Order.OrderID, out.Refunded)
		}
		return fmt.Sprintf("Order %s is cancelled.", out.Order.OrderID)
	case "issue_refund":
		var out struct {
			OrderID  string `json:"order_id"`
			Refunded string `json:"refunded"`
		}
		_ = json.Unmarshal(r.Output, &out)
		done := fmt.Sprintf("Done: I refunded %s on order %s. It should reach you within 5 business days.", out.Refunded, out.OrderID)
		var asked, ran struct{ Amount float64 }
		if r.OriginalArgs != nil && json.Unmarshal(r.OriginalArgs, &asked) == nil && json.Unmarshal(r.Args, &ran) == nil && asked.Amount != ran.Amount {
			return fmt.Sprintf("A team member changed the amount from %s to %s before approving it. ", models.CentsOf(asked.Amount), models.CentsOf(ran.Amount)) + done
		}
		return done
	}
	return "Done."
}

func requestNoun(r *llm.ToolResult) string {
	d := strings.TrimPrefix(r.Request, "your ")
	if d == "" {
		d = "request"
	}
	d = strings.Replace(d, "refund request of", "refund of", 1)
	return "the " + d
}

func ensureStop(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
