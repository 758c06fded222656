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

// Policy expressions: CEL conditions compiled once, and reason templates
// whose placeholders are CEL too.

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
	// Its worst case is bounded at load (bounds.go); the same limit stops
	// an evaluation that would pass it anyway.
	if err := checkCost(ast); err != nil {
		return nil, nil, err
	}
	prg, err := celEnv.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(MaxConditionCost))
	if err != nil {
		return nil, nil, err
	}
	return prg, ast, nil
}

// template is a reason with {{ CEL }} placeholders, compiled at load.
type template struct {
	text  []string // literal pieces, one more than exprs
	exprs []cel.Program
}

var placeholder = regexp.MustCompile(`\{\{(.*?)\}\}`)

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
		last = m[1]
	}
	t.text = append(t.text, s[last:])
	return t, nil
}

// render fills the placeholders; one CEL cannot evaluate (a missing
// argument) reads "?".
func (t *template) render(act *activation) string {
	if len(t.exprs) == 0 {
		return t.text[0]
	}
	var b strings.Builder
	for i, prg := range t.exprs {
		b.WriteString(t.text[i])
		out, _, err := prg.Eval(act)
		if err != nil {
			b.WriteString("?")
			continue
		}
		switch v := out.Value().(type) {
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
