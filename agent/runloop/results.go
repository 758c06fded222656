package runloop

import (
	"strings"

	"github.com/countersign/countersign/agent/gate"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// ToolResultText is what the model is told about a call that reached its
// end: the gate's words for the outcome (gate.TellOutcome, what outside
// agents are told too) with its advice; a result as the tool gave it, and
// what a person changed before approving.
func ToolResultText(c *models.ToolCall) string {
	if c.Status == models.CallSucceeded {
		if c.OriginalArgs != "" {
			return c.Result + "\nA team member changed the arguments before approving: asked " + c.OriginalArgs + ", ran " + c.Args +
				". Tell the customer what was changed."
		}
		return c.Result
	}
	if c.Status.UnderWay() {
		return "Still waiting for a decision on this call."
	}
	return gate.TellOutcome(c).Said()
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
