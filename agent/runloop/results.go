package runloop

import (
	"strings"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// ToolResultText is what the model is told about a call that reached its
// end. Each outcome reads differently, and the ones that must not be tried
// again say so plainly.
func ToolResultText(c *models.ToolCall) string {
	switch c.Status {
	case models.CallSucceeded:
		if c.OriginalArgs != "" {
			return c.Result + "\nA team member changed the arguments before approving: asked " + c.OriginalArgs + ", ran " + c.Args +
				". Tell the customer what was changed."
		}
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
func callFinished(status models.CallStatus) bool { return !status.UnderWay() }

// describeRequest says in a few words what a call asks for, for customers,
// in the tool's own words (tools.Tool.DescribeRequest).
func describeRequest(reg *tools.Registry, tool, args string) string {
	if t, ok := reg.Get(tool); ok {
		return t.DescribeRequest(args)
	}
	return "your request (" + strings.ReplaceAll(tool, "_", " ") + ")"
}

// pendingNotice is the system notice a customer sees while a person reviews.
func pendingNotice(reg *tools.Registry, calls []models.ToolCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, describeRequest(reg, c.Tool, c.Args))
	}
	switch len(parts) {
	case 0:
		return "A team member is reviewing your request."
	case 1:
		return "A team member is reviewing " + parts[0] + ". You'll see the outcome here."
	}
	return "A team member is reviewing " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + ". You'll see the outcome here."
}
