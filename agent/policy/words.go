package policy

import (
	"strconv"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// A rule's condition in words, for the people who read the policy page:
// "args.amount + totals.refunded_on_order > 1000" reads "the amount plus
// the total refunded on order is more than 1,000". Only the common shapes
// are put in words (comparisons, and/or/not, arithmetic, the inputs a
// condition sees, literals, in, size, has); a condition with any other
// part is shown as written, so words never say less than the CEL does.

// ConditionWords is a condition (CEL) in words, and whether it could be
// said in words at all ("" and false when it could not).
func ConditionWords(expr string) (string, bool) {
	if strings.TrimSpace(expr) == "" {
		return "always", true
	}
	parsed, iss := celEnv.Parse(expr)
	if iss != nil && iss.Err() != nil {
		return "", false
	}
	w := &wording{}
	s := w.say(parsed.NativeRep().Expr(), 0)
	if w.unsaid {
		return "", false
	}
	return s, true
}

type wording struct{ unsaid bool }

// The strength with which each kind of phrase binds, for parentheses: an
// "or" inside an "and" needs them, an "and" inside an "or" does not.
const (
	bindOr = iota + 1
	bindAnd
	bindCompare
	bindSum
	bindProduct
	bindAtom
)

var comparisons = map[string]string{
	operators.Greater: "is more than", operators.GreaterEquals: "is at least",
	operators.Less: "is less than", operators.LessEquals: "is at most",
	operators.Equals: "is", operators.NotEquals: "is not",
}

var arithmetic = map[string]struct {
	words string
	bind  int
}{
	operators.Add: {"plus", bindSum}, operators.Subtract: {"minus", bindSum},
	operators.Multiply: {"times", bindProduct}, operators.Divide: {"divided by", bindProduct},
}

// say is e in words; outer is how strongly the phrase around it binds.
func (w *wording) say(e celast.Expr, outer int) string {
	switch e.Kind() {
	case celast.LiteralKind:
		return literal(e.AsLiteral())
	case celast.IdentKind:
		return w.ident(e.AsIdent())
	case celast.SelectKind:
		return w.selected(e.AsSelect())
	case celast.ListKind:
		var items []string
		for _, el := range e.AsList().Elements() {
			items = append(items, w.say(el, bindAtom))
		}
		return strings.Join(items, ", ")
	case celast.CallKind:
		return w.call(e.AsCall(), outer)
	}
	w.unsaid = true
	return ""
}

func (w *wording) call(c celast.CallExpr, outer int) string {
	fn, args := c.FunctionName(), c.Args()
	wrap := func(s string, bind int) string {
		if bind < outer {
			return "(" + s + ")"
		}
		return s
	}
	switch {
	case fn == operators.LogicalAnd && len(args) == 2:
		return wrap(w.say(args[0], bindAnd)+" and "+w.say(args[1], bindAnd), bindAnd)
	case fn == operators.LogicalOr && len(args) == 2:
		return wrap(w.say(args[0], bindOr)+" or "+w.say(args[1], bindOr), bindOr)
	case fn == operators.LogicalNot && len(args) == 1:
		return "not " + w.say(args[0], bindAtom)
	case comparisons[fn] != "" && len(args) == 2:
		return wrap(w.say(args[0], bindSum)+" "+comparisons[fn]+" "+w.say(args[1], bindSum), bindCompare)
	case arithmetic[fn].words != "" && len(args) == 2:
		a := arithmetic[fn]
		return wrap(w.say(args[0], a.bind)+" "+a.words+" "+w.say(args[1], a.bind+1), a.bind)
	case fn == operators.In && len(args) == 2:
		return wrap(w.say(args[0], bindSum)+" is one of "+w.say(args[1], bindAtom), bindCompare)
	case fn == operators.Index && len(args) == 2:
		return w.say(args[0], bindAtom) + " for " + w.say(args[1], bindAtom)
	case fn == "size" && len(args) == 1 && !c.IsMemberFunction():
		return "the number of " + strings.TrimPrefix(w.say(args[0], bindAtom), "the ")
	case fn == "money" && len(args) == 1 && !c.IsMemberFunction():
		return w.say(args[0], bindSum) + ", in dollars"
	}
	w.unsaid = true
	return ""
}

// ident is one of the inputs a condition sees, by itself.
func (w *wording) ident(name string) string {
	switch name {
	case "tool":
		return "the tool"
	case "risk":
		return "the tool's risk"
	}
	w.unsaid = true
	return ""
}

// selected is a field of an input: args.amount reads "the amount",
// totals.refunded_24h "the total refunded 24h", customer.signed_in "the
// customer's signed in".
func (w *wording) selected(s celast.SelectExpr) string {
	field := humanField(s.FieldName())
	op := s.Operand()
	if op.Kind() == celast.IdentKind {
		if s.IsTestOnly() { // has(args.x)
			return w.field(op.AsIdent(), field) + " is given"
		}
		if op.AsIdent() == "customer" && s.FieldName() == "signed_in" {
			return "the customer is signed in"
		}
		return w.field(op.AsIdent(), field)
	}
	if op.Kind() == celast.SelectKind && !s.IsTestOnly() {
		return w.selected(op.AsSelect()) + " " + field
	}
	w.unsaid = true
	return ""
}

// field is an input's field in words.
func (w *wording) field(input, field string) string {
	switch input {
	case "args":
		return "the " + field
	case "totals":
		return "the total " + field
	case "customer":
		return "the customer's " + field
	case "run":
		return "the run's " + field
	}
	w.unsaid = true
	return ""
}

// humanField is a field's name in words: "order_id" reads "order ID".
func humanField(name string) string {
	words := strings.Split(name, "_")
	for i, w := range words {
		if w == "id" || w == "url" {
			words[i] = strings.ToUpper(w)
		}
	}
	return strings.Join(words, " ")
}

// literal is a constant as people write it: 1000 reads "1,000".
func literal(v any) string {
	switch x := v.(type) {
	case types.Int:
		return thousands(strconv.FormatInt(int64(x), 10))
	case types.Uint:
		return thousands(strconv.FormatUint(uint64(x), 10))
	case types.Double:
		s := strconv.FormatFloat(float64(x), 'f', -1, 64)
		whole, frac, _ := strings.Cut(s, ".")
		if frac != "" {
			return thousands(whole) + "." + frac
		}
		return thousands(whole)
	case types.String:
		return strconv.Quote(string(x))
	case types.Bool:
		if x {
			return "true"
		}
		return "false"
	}
	return "nothing"
}

func thousands(digits string) string {
	sign := ""
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	for i := len(digits) - 3; i > 0; i -= 3 {
		digits = digits[:i] + "," + digits[i:]
	}
	return sign + digits
}

// ReasonWords is a reason template as people read it, each {{ CEL }} put
// in words between brackets ("Refund of {{ money(args.amount) }}" reads
// "Refund of [the amount, in dollars]"); a placeholder without words is
// left as written.
func ReasonWords(reason string) string {
	return placeholder.ReplaceAllStringFunc(reason, func(ph string) string {
		inner := strings.TrimSpace(placeholder.FindStringSubmatch(ph)[1])
		if words, ok := ConditionWords(inner); ok && inner != "" {
			return "[" + words + "]"
		}
		return ph
	})
}
