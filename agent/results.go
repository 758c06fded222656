package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/countersign/countersign/models"
)

// ToolResultText is what the model is told about a call that reached its
// end. Each outcome reads differently, and the ones that must not be tried
// again say so plainly.
func ToolResultText(c *models.ToolCall) string {
	switch c.Status {
	case models.CallSucceeded:
		return c.Result
	case models.CallFailed:
		return "Error: the tool failed: " + c.Error + ". Tell the customer what happened."
	case models.CallInvalid:
		return "Error: the call was invalid: " + c.Error + ". Fix the arguments and call again only if the customer still wants this."
	case models.CallDenied:
		return "Denied by policy: " + c.Reason + ". Do not retry this call; tell the customer it cannot be done."
	case models.CallRejected:
		return "Rejected by a team member: " + strings.TrimPrefix(c.Error, "rejected by staff: ") + ". Do not retry this call; tell the customer, with this reason."
	case models.CallExpired:
		return "Expired: no team member decided in time, so nothing was done. Do not retry this call unless the customer asks again."
	case models.CallCancelled:
		return "Cancelled: " + strings.TrimPrefix(c.Error, "cancelled: ") + ". Nothing was done. Do not retry this call."
	case models.CallUnknown:
		return "Unknown outcome: the system stopped while this call was running. A team member will check what happened. Do not retry this call."
	}
	return "Still waiting for a decision on this call."
}

// callFinished reports whether a call has reached an end.
func callFinished(status models.CallStatus) bool {
	switch status {
	case models.CallPending, models.CallApproved, models.CallExecuting, models.CallAllowed:
		return false
	}
	return true
}

// describeRequest says in a few words what a call asks for, for customers.
func describeRequest(tool, args string) string {
	var a struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
		Address string  `json:"address"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	switch tool {
	case "issue_refund":
		if a.OrderID != "" {
			return fmt.Sprintf("your refund request of %s on order %s", models.FormatCents(int64(a.Amount*100+0.5)), a.OrderID)
		}
		return fmt.Sprintf("your refund request of %s", models.FormatCents(int64(a.Amount*100+0.5)))
	case "cancel_order":
		return "your request to cancel order " + a.OrderID
	case "update_shipping_address":
		return "your address change for order " + a.OrderID
	}
	return "your request (" + strings.ReplaceAll(tool, "_", " ") + ")"
}

// pendingNotice is the system notice a customer sees while a person reviews.
func pendingNotice(calls []models.ToolCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, describeRequest(c.Tool, c.Args))
	}
	switch len(parts) {
	case 0:
		return "A team member is reviewing your request."
	case 1:
		return "A team member is reviewing " + parts[0] + ". You'll see the outcome here."
	}
	return "A team member is reviewing " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + ". You'll see the outcome here."
}
