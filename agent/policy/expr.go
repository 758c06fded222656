package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/countersign/countersign/models"
)

// Policy expressions: CEL conditions compiled once, reason templates, and the
// direct answers for plain field paths and comparisons (each checked against
// CEL by a test).

var celEnv = mustCELEnv()

func mustCELEnv() *cel.Env {
	money := func(v ref.Val) ref.Val {
		var f float64
		switch x := v.(type) {
		case types.Double:
			f = float64(x)
		case types.Int:
			f = float64(x)
		case types.Uint:
			f = float64(x)
		default:
			return types.NewErr("money() takes a number")
		}
		return types.String(models.CentsOf(f).String())
	}
	env, err := cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("risk", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("customer", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("run", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("totals", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.Function("money",
			cel.Overload("money_double", []*cel.Type{cel.DoubleType}, cel.StringType, cel.UnaryBinding(money)),
			cel.Overload("money_int", []*cel.Type{cel.IntType}, cel.StringType, cel.UnaryBinding(money)),
		),
	)
	if err != nil {
		panic(err)
	}
	return env
}

func compileCEL(expr string) (cel.Program, *cel.Ast, error) {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("%s", strings.TrimSpace(iss.Err().Error()))
	}
	// No cost limit: conditions are written by admins and checked at load,
	// and their inputs are bounded (arguments are at most 16 KiB).
	prg, err := celEnv.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, err
	}
	return prg, ast, nil
}

// template is a reason with {{ CEL }} placeholders, compiled at load.
type template struct {
	text  []string // literal pieces, one more than exprs
	exprs []cel.Program
	// paths holds, for each placeholder that is a plain field path such as
	// args.amount or money(args.amount), that path: it is read straight from
	// the activation, which gives what CEL would and costs a map lookup.
	paths []*fieldPath
}

type fieldPath struct {
	variable, field string // field empty: the variable itself
	money           bool
}

var (
	placeholder = regexp.MustCompile(`\{\{(.*?)\}\}`)
	plainPath   = regexp.MustCompile(`^(money\()?\s*(tool|risk|args|customer|run|totals)(?:\.([a-z_][a-z0-9_]*))?\s*(\))?$`)
)

func parsePath(expr string) *fieldPath {
	m := plainPath.FindStringSubmatch(expr)
	if m == nil || (m[1] != "") != (m[4] != "") {
		return nil
	}
	return &fieldPath{variable: m[2], field: m[3], money: m[1] != ""}
}

// value reads the path; ok is false where CEL would have failed.
func (p *fieldPath) value(act *activation) (any, bool) {
	v, _ := act.ResolveName(p.variable)
	if p.field != "" {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		if v, isMap = m[p.field]; !isMap {
			return nil, false
		}
	}
	if !p.money {
		return v, true
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	case int:
		f = float64(x)
	default:
		return nil, false
	}
	return models.CentsOf(f).String(), true
}

func compileTemplate(s string) (*template, error) {
	t := &template{}
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(s, -1) {
		t.text = append(t.text, s[last:m[0]])
		prg, _, err := compileCEL(strings.TrimSpace(s[m[2]:m[3]]))
		if err != nil {
			return nil, fmt.Errorf("placeholder {{%s}}: %w", s[m[2]:m[3]], err)
		}
		t.exprs = append(t.exprs, prg)
		t.paths = append(t.paths, parsePath(strings.TrimSpace(s[m[2]:m[3]])))
		last = m[1]
	}
	t.text = append(t.text, s[last:])
	return t, nil
}

func (t *template) render(act *activation) string {
	if len(t.exprs) == 0 {
		return t.text[0]
	}
	var b strings.Builder
	for i, prg := range t.exprs {
		b.WriteString(t.text[i])
		var value any
		if p := t.paths[i]; p != nil {
			v, ok := p.value(act)
			if !ok {
				b.WriteString("?")
				continue
			}
			value = v
		} else {
			out, _, err := prg.Eval(act)
			if err != nil {
				b.WriteString("?")
				continue
			}
			value = out.Value()
		}
		switch v := value.(type) {
		case string:
			b.WriteString(v)
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		default:
			fmt.Fprint(&b, v)
		}
	}
	b.WriteString(t.text[len(t.text)-1])
	return b.String()
}

// comparison is a condition of the form <variable>.<field> <op> <number>.
type comparison struct {
	path  fieldPath
	op    string
	value float64
}

var comparisonRe = regexp.MustCompile(`^\s*(args|customer|run|totals)\.([a-z_][a-z0-9_]*)\s*(<=|>=|<|>|==|!=)\s*(-?[0-9]+(?:\.[0-9]+)?)\s*$`)

func parseComparison(expr string) *comparison {
	m := comparisonRe.FindStringSubmatch(expr)
	if m == nil {
		return nil
	}
	v, err := strconv.ParseFloat(m[4], 64)
	if err != nil {
		return nil
	}
	return &comparison{path: fieldPath{variable: m[1], field: m[2]}, op: m[3], value: v}
}

// eval compares; ok is false when the value is not a number CEL would
// compare the same way (missing, a string, a huge integer): CEL decides then.
func (c *comparison) eval(act *activation) (match, ok bool) {
	raw, found := c.path.value(act)
	if !found {
		return false, false
	}
	var x float64
	switch v := raw.(type) {
	case float64:
		x = v
	case int64:
		if v > 1<<53 || v < -(1<<53) {
			return false, false
		}
		x = float64(v)
	default:
		return false, false
	}
	switch c.op {
	case "<":
		return x < c.value, true
	case "<=":
		return x <= c.value, true
	case ">":
		return x > c.value, true
	case ">=":
		return x >= c.value, true
	case "==":
		return x == c.value, true
	case "!=":
		return x != c.value, true
	}
	return false, false
}
