package policy

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// What one policy may cost. A policy is written by one admin and then runs
// on every call and in every proposal's tests, so what it may build and
// how long a condition may take are bounded at load, where its author sees
// the refusal, not on the gate's path.
const (
	// MaxNodes bounds the values a policy's YAML stands for once its
	// aliases are expanded (a 758-byte alias bomb stands for billions).
	MaxNodes = 100_000
	// MaxRules and MaxTests bound the lists a policy carries.
	MaxRules = 1_000
	MaxTests = 1_000
	// MaxConditionCost bounds a condition's (or a reason placeholder's)
	// worst-case cost as CEL's estimator counts it, over arguments of at
	// most maxInputSize; the same number stops an evaluation that would
	// pass it (cel.CostLimit). A comparison costs about 1; a list of 10,000
	// checked item by item about 30,000.
	MaxConditionCost = 1_000_000
	// maxInputSize is the most elements or bytes any one value a condition
	// reads can have: a call's arguments are at most 16 KiB.
	maxInputSize = 16 << 10
)

// countNodes refuses a YAML whose aliases expand past MaxNodes, before
// anything decodes it. Anchors are counted as they are met, in document
// order, which is also the only order in which an alias may use one.
func countNodes(data []byte) error {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil // the decoder says what is wrong, with its line
	}
	c := nodeCounter{anchors: map[string]int{}}
	total := 0
	for _, d := range f.Docs {
		total = add(total, c.count(d))
	}
	if total > MaxNodes {
		line := 0
		if c.bigAlias != nil {
			line = c.bigAlias.GetToken().Position.Line
		}
		return fmt.Errorf("line %d: its aliases expand to more than %d values; write the values out or use fewer aliases", line, MaxNodes)
	}
	return nil
}

type nodeCounter struct {
	anchors  map[string]int
	bigAlias ast.Node // the alias that expanded most, for the error's line
	bigSize  int
}

// add is a sum that stops a little past MaxNodes (so no count overflows).
func add(a, b int) int {
	if a+b > MaxNodes+1 {
		return MaxNodes + 1
	}
	return a + b
}

// countAll counts a collection: itself and what it holds.
func countAll[N ast.Node](c *nodeCounter, values []N) int {
	total := 1
	for _, v := range values {
		total = add(total, c.count(v))
	}
	return total
}

func (c *nodeCounter) count(n ast.Node) int {
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.DocumentNode:
		return c.count(n.Body)
	case *ast.MappingNode:
		return countAll(c, n.Values)
	case *ast.MappingValueNode:
		return add(c.count(n.Key), c.count(n.Value))
	case *ast.MappingKeyNode:
		return c.count(n.Value)
	case *ast.SequenceNode:
		return countAll(c, n.Values)
	case *ast.TagNode:
		return c.count(n.Value)
	case *ast.AnchorNode:
		size := c.count(n.Value)
		if n.Name != nil {
			c.anchors[n.Name.String()] = size
		}
		return size
	case *ast.AliasNode:
		size := 1
		if n.Value != nil {
			if s, ok := c.anchors[n.Value.String()]; ok {
				size = s
			}
		}
		if size > c.bigSize {
			c.bigAlias, c.bigSize = n, size
		}
		return size
	default:
		return 1
	}
}

// boundedInputs tells CEL's estimator how big what a condition reads can
// be: nothing a call brings is over maxInputSize.
type boundedInputs struct{}

func (boundedInputs) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	s := cost.RangedSizeEstimate(0, maxInputSize)
	return &s
}

func (boundedInputs) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// checkCost refuses an expression whose worst case costs more than
// MaxConditionCost.
func checkCost(a *cel.Ast) error {
	est, err := celEnv.EstimateCost(a, boundedInputs{})
	if err != nil {
		return fmt.Errorf("its cost cannot be estimated: %w", err)
	}
	if est.Max > MaxConditionCost {
		return fmt.Errorf("it may cost up to %d steps on one call, over the limit of %d; loop over fewer values or nest fewer loops", est.Max, MaxConditionCost)
	}
	return nil
}
