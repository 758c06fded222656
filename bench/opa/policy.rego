# The default Countersign policy written in Rego, for the benchmark only.
package countersign

import rego.v1

default decision := {"verdict": "allow", "rule": "default:read"}

decision := {"verdict": "needs_approval", "rule": "refund-over-1000-two-person", "approvals": 2, "role": "supervisor",
	"reason": sprintf("Refunds on order %s would come to $%.2f with this one of $%.2f, over $1,000: two approvers, one of them a supervisor", [input.args.order_id, input.args.amount + input.totals.refunded_on_order, input.args.amount])} if {
	input.tool == "issue_refund"
	input.args.amount + input.totals.refunded_on_order > 1000
} else := {"verdict": "needs_approval", "rule": "refund-customer-over-1000-in-24h-two-person", "approvals": 2, "role": "supervisor",
	"reason": sprintf("This customer's refunds in the last 24 hours would come to $%.2f with this one of $%.2f, over $1,000: two approvers, one of them a supervisor", [input.args.amount + input.totals.refunded_24h, input.args.amount])} if {
	input.tool == "issue_refund"
	input.args.amount + input.totals.refunded_24h > 1000
} else := {"verdict": "needs_approval", "rule": "refund-customer-over-500-in-24h", "approvals": 1,
	"reason": sprintf("Refund of $%.2f: with it, this customer's refunds in the last 24 hours would come to $%.2f", [input.args.amount, input.args.amount + input.totals.refunded_24h])} if {
	input.tool == "issue_refund"
	input.totals.refunded_24h > 0
	input.args.amount + input.totals.refunded_24h > 500
} else := {"verdict": "allow", "rule": "small-refund", "reason": sprintf("Refund of $%.2f is within the $50 limit", [input.args.amount])} if {
	input.tool == "issue_refund"
	input.args.amount <= 50
} else := {"verdict": "needs_approval", "rule": "refund-needs-approval", "approvals": 1, "reason": sprintf("Refund of $%.2f", [input.args.amount])} if {
	input.tool == "issue_refund"
} else := {"verdict": "allow", "rule": "default:read", "reason": "reads are allowed"} if {
	input.risk == "read"
} else := {"verdict": "allow", "rule": "default:low_write", "reason": "low-risk writes are allowed"} if {
	input.risk == "low_write"
} else := {"verdict": "needs_approval", "rule": "default:high_write", "approvals": 1, "reason": sprintf("High-risk tool: %s", [input.tool])} if {
	input.risk == "high_write"
}
