package gate

import (
	"strings"

	"github.com/countersign/countersign/models"
)

// Told is what Countersign says of a call's outcome to whoever asked for
// it: an outside agent (the gate API, MCP) or its own run loop's model. It
// is the one rendering of an outcome in words; each door adds only its
// form (a JSON field, an MCP result, a tool turn).
type Told struct {
	// Words say what became of the call ("" for a call that succeeded:
	// its result says it).
	Words string
	// Advice says what the asker should do next, for a model that reads
	// instructions ("" when there is nothing to add).
	Advice string
	// Failed: the call did not do what was asked (an error result).
	Failed bool
}

// TellOutcome is the words for a call as it stands: the one table, by
// status.
func TellOutcome(c *models.ToolCall) Told {
	switch c.Status {
	case models.CallSucceeded:
		return Told{}
	case models.CallDenied:
		if strings.HasPrefix(c.Rule, "limit:") { // a limit, not the policy
			return Told{Words: "Not run: " + c.Reason, Advice: "Wait for the requests already waiting to be decided before asking again.", Failed: true}
		}
		return Told{Words: "Denied by policy: " + c.Reason, Advice: "Do not retry this call; tell the customer it cannot be done.", Failed: true}
	case models.CallRejected:
		return Told{Words: "Rejected by a person: " + strings.TrimPrefix(c.Error, "rejected by staff: "),
			Advice: "Do not retry this call; tell the customer, with this reason.", Failed: true}
	case models.CallExpired:
		return Told{Words: "Expired: nobody decided in time; nothing was done.", Advice: "Do not retry this call unless the customer asks again.", Failed: true}
	case models.CallCancelled:
		return Told{Words: "Cancelled: " + strings.TrimPrefix(c.Error, "cancelled: "), Advice: "Nothing was done. Do not retry this call.", Failed: true}
	case models.CallUnknown:
		why := c.Error
		if why == "" {
			why = "the system stopped while this call was running"
		}
		return Told{Words: "Outcome unknown: " + why, Advice: "A team member will check what happened. Do not retry this call.", Failed: true}
	case models.CallInvalidated:
		return Told{Words: "Not run: " + c.Error, Advice: "Nothing was done. Ask again only if the customer still wants this.", Failed: true}
	case models.CallInvalid:
		return Told{Words: "The call was invalid: " + c.Error, Advice: "Fix the arguments and call again only if the customer still wants this.", Failed: true}
	case models.CallFailed:
		// The tool's own words (an upstream's error text as it sent it).
		return Told{Words: c.Error, Advice: "Tell the customer what happened.", Failed: true}
	}
	// Under way: a person has not decided, or it is about to run or runs.
	return Told{Words: "Waiting for a person to decide (call " + c.ID + ", " + string(c.Status) + "). Nothing has been done yet unless it says executing.",
		Advice: "Call this tool again with the same arguments to get the outcome; that never makes a second request."}
}

// Said is the words and the advice as one text.
func (t Told) Said() string {
	switch {
	case t.Words == "":
		return t.Advice
	case t.Advice == "":
		return t.Words
	}
	return strings.TrimSuffix(t.Words, ".") + ". " + t.Advice
}
