package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// Risk says how much harm a tool can do.
type Risk string

// The three risk levels.
const (
	RiskRead      Risk = "read"
	RiskLowWrite  Risk = "low_write"
	RiskHighWrite Risk = "high_write"
)

// Valid reports whether r is one of the three risk levels.
func (r Risk) Valid() bool {
	return r == RiskRead || r == RiskLowWrite || r == RiskHighWrite
}

// Above reports whether r is a higher risk than o (high_write above
// low_write above read).
func (r Risk) Above(o Risk) bool { return r.level() > o.level() }

func (r Risk) level() int {
	switch r {
	case RiskRead:
		return 1
	case RiskLowWrite:
		return 2
	case RiskHighWrite:
		return 3
	}
	return 0
}

// Call is what a tool's run function learns about the call besides its
// arguments. The customer comes from the run, never from the model.
type Call struct {
	ID             string
	IdempotencyKey string
	RunID          string
	CustomerID     string // empty when the run is anonymous
	CustomerName   string
}

// Definition describes a tool whose input is the struct In. In's exported
// fields, their json names and jsonschema tags are the schema the model sees.
type Definition[In any] struct {
	Name        string
	Description string
	// Summary says in words what a call asks for, from its arguments
	// ("Refund {amount:money} on order {order_id}"; see summary.go).
	Summary string
	// Request is how the customer hears the call while a person reviews it
	// ("your refund request of {amount:money} on order {order_id}"); empty:
	// "your request (<name>)".
	Request string
	// Amount names the top-level argument that is a sum of money, in
	// dollars, when the tool has one ("amount"): the queue shows it and
	// filters by it.
	Amount string
	Risk   Risk
	// Idempotent tools may be run again after a crash mid-execution; others
	// are left for a human to reconcile.
	Idempotent bool
	Run        func(ctx context.Context, call Call, in In) (any, error)
	// Check, when set, says before the call is decided whether it could
	// succeed now (the order is the customer's, there is enough left to
	// refund). It only reads. A RefusalError it returns is told to the model
	// and the call is never decided or queued: a person is never asked to
	// approve what cannot work. Run still enforces its rules when it runs.
	Check func(ctx context.Context, call Call, in In) error
	// Review, when set, tells an approver what to know about a call (the
	// order it is about: items, total, refunded so far). It only reads.
	Review func(ctx context.Context, call Call, in In) ([]Fact, error)
}

// Fact is one line of what an approver should know about a call. Key facts
// (the money an order has left, say) are what the decision turns on: the
// action page shows them beside the decision, not only with the evidence.
type Fact struct {
	Label, Value string
	Key          bool
}

// Tool is a registered, type-erased tool.
type Tool struct {
	Name        string
	Description string
	Summary     string
	Request     string
	Amount      string
	Risk        Risk
	Idempotent  bool
	// Schema is the JSON Schema of the input, exactly as a model is shown it.
	Schema json.RawMessage
	// Origin says where a tool from outside comes from and why it has its
	// risk (an MCP server's tool); empty for tools defined in Go or a file.
	Origin string
	// Upstream is the MCP server the tool comes from ("" for others), and
	// Listing the tool as that server listed it (MCP's Tool object: title,
	// output schema, annotations, icons…), passed on to MCP clients as it
	// came but for the name.
	Upstream string
	Listing  json.RawMessage
	// UpstreamName is the tool's name at its MCP server ("" for others).
	UpstreamName string
	// Unlisted: the MCP server does not list the tool; the tools file
	// forwards calls to it at a risk of its own (unlisted_tools). It is
	// never offered, only called by name.
	Unlisted bool
	// Wire is the same tool in the bytes the server's list held it (nil:
	// not known, a stdio list read before): what MCP clients are given.
	// Listing, an encoding of what was read, is what a pin's hash covers.
	Wire json.RawMessage
	// Revision is the one MCP revision whose clients the upstream lists
	// the tool to (LegacyOnly, or a revision without sessions such as
	// 2026-07-28); "": clients of every revision. ModernWire is the tool in
	// the bytes the upstream lists it in to clients without sessions, when
	// it lists it to both (nil: as Wire).
	Revision   string
	ModernWire json.RawMessage
	// Place is where in its list the upstream listed the tool (0: first):
	// in the list at Revision, or at 2025-11-25 when it lists the tool to
	// both; ModernPlace is where in its 2026-07-28 list then. MCP clients
	// are offered an upstream's tools in its order.
	Place, ModernPlace int
	// TrustListing: the tools file trusts this server's definitions
	// (trust_annotations), so a new or changed one needs no admin to
	// accept it before its annotations count.
	TrustListing bool
	// Target is where and how Countersign sends the tool's calls, as the
	// tools file writes it (an HTTP tool's method, URL template and header
	// names, and whether it signs its body; never a secret's value): part
	// of the definition an approval was given under, so a call is not sent
	// elsewhere than what its approvers approved. "" for other tools.
	Target string

	schema   *validator.Schema
	defaults map[string]any
	decode   func([]byte) (any, error)
	run      RunFunc
	check    func(ctx context.Context, call Call, in any) error
	review   func(ctx context.Context, call Call, in any) ([]Fact, error)
	// definitionHash is DefinitionHash, worked out once when built.
	definitionHash string
}

// LegacyOnly is Tool.Revision for a tool offered only to MCP clients of
// the 2025 revisions (with sessions).
const LegacyOnly = "2025-11-25"

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// MCPToolName is what the MCP specification allows a tool's name to be
// (2025-11-25, "Tool names").
var MCPToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// New reflects the input schema of a tool definition and compiles its
// validator. It fails on a definition a model could not use.
func New[In any](def Definition[In]) (*Tool, error) {
	if err := checkNameAndRisk(def.Name, def.Risk); err != nil {
		return nil, err
	}
	if def.Run == nil {
		return nil, fmt.Errorf("tool %s: no run function", def.Name)
	}
	var zero In
	if reflect.TypeOf(zero) == nil || reflect.TypeOf(zero).Kind() != reflect.Struct {
		return nil, fmt.Errorf("tool %s: the input type must be a struct", def.Name)
	}
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(&zero)
	s.Version = "" // models want a plain object schema, not a draft marker
	schemaJSON, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", def.Name, err)
	}
	compiled, defaults, err := compileSchema(def.Name, schemaJSON)
	if err != nil {
		return nil, err
	}
	run := def.Run
	var check func(ctx context.Context, call Call, in any) error
	if def.Check != nil {
		check = func(ctx context.Context, call Call, in any) error {
			typed, ok := in.(In)
			if !ok {
				return errors.New("internal error: input of the wrong type")
			}
			return def.Check(ctx, call, typed)
		}
	}
	var review func(ctx context.Context, call Call, in any) ([]Fact, error)
	if def.Review != nil {
		review = func(ctx context.Context, call Call, in any) ([]Fact, error) {
			typed, ok := in.(In)
			if !ok {
				return nil, errors.New("internal error: input of the wrong type")
			}
			return def.Review(ctx, call, typed)
		}
	}
	t := &Tool{
		Name:        def.Name,
		Description: def.Description,
		Summary:     def.Summary,
		Request:     def.Request,
		Amount:      def.Amount,
		Risk:        def.Risk,
		Idempotent:  def.Idempotent,
		Schema:      schemaJSON,
		schema:      compiled,
		defaults:    defaults,
		decode: func(b []byte) (any, error) {
			// The schema has already refused unknown fields.
			var in In
			if err := json.Unmarshal(b, &in); err != nil {
				return nil, err
			}
			return in, nil
		},
		run: func(ctx context.Context, call Call, in any) (any, error) {
			typed, ok := in.(In)
			if !ok {
				return nil, errors.New("internal error: input of the wrong type")
			}
			return run(ctx, call, typed)
		},
		check:  check,
		review: review,
	}
	t.definitionHash = t.hashDefinition()
	return t, nil
}

// MustNew is New for tools defined at package level.
func MustNew[In any](def Definition[In]) *Tool {
	t, err := New(def)
	if err != nil {
		panic(err)
	}
	return t
}

// Run runs the tool on normalized arguments.
func (t *Tool) Run(ctx context.Context, call Call, args Normalized) (any, error) {
	if t.run == nil {
		return nil, fmt.Errorf("tool %s is decision-only: the agent that asked carries it out", t.Name)
	}
	return t.run(ctx, call, args.Value)
}

// HasCheck reports whether the tool checks its calls before they are decided.
func (t *Tool) HasCheck() bool { return t.check != nil }

// HasReview tells whether the tool tells an approver what to know.
func (t *Tool) HasReview() bool { return t.review != nil }

// Check runs the tool's read-only check on normalized arguments; nil when
// the tool has none or the call could succeed.
func (t *Tool) Check(ctx context.Context, call Call, args Normalized) error {
	if t.check == nil {
		return nil
	}
	return t.check(ctx, call, args.Value)
}

// ReviewContext is what an approver should know about a call whose
// normalized arguments are args (JSON); nothing when the tool says nothing.
func (t *Tool) ReviewContext(ctx context.Context, call Call, args string) ([]Fact, error) {
	if t.review == nil {
		return nil, nil
	}
	norm, err := t.Normalize([]byte(args))
	if err != nil {
		return nil, err
	}
	return t.review(ctx, call, norm.Value)
}

// RefusalError is a failure the tool's own rules decided (not enough left to
// refund, order already shipped). Its message is safe to show the model and
// the customer; other errors are not.
type RefusalError struct{ Message string }

func (e *RefusalError) Error() string { return e.Message }

// Refuse returns a RefusalError.
func Refuse(format string, args ...any) error {
	return &RefusalError{Message: fmt.Sprintf(format, args...)}
}

// RunFunc is a tool's run function with its input type erased.
type RunFunc func(ctx context.Context, call Call, in any) (any, error)

// WithRisk is the tool at a higher risk than it was built with, for the
// reason why (shown where the tool's origin is).
func (t *Tool) WithRisk(r Risk, why string) *Tool {
	c := *t
	c.Risk = r
	if why != "" {
		c.Origin = strings.TrimSpace(c.Origin + "; " + why)
	}
	c.definitionHash = c.hashDefinition()
	return &c
}

// SetListing keeps the tool as its MCP server listed it (what an admin
// accepts, what clients are offered), part of its definition's hash.
func (t *Tool) SetListing(listing json.RawMessage) {
	t.Listing = listing
	t.definitionHash = t.hashDefinition()
}

// WithMiddleware returns a copy of the tool whose runs go through mw: for
// metrics, tracing, or counting executions in tests.
func (t *Tool) WithMiddleware(mw func(next RunFunc) RunFunc) *Tool {
	c := *t
	c.run = mw(t.run)
	return &c
}

// checkNameAndRisk refuses a name a model could not call and an unknown risk.
func checkNameAndRisk(name string, risk Risk) error {
	if !toolName.MatchString(name) {
		return fmt.Errorf("tool name %q: use lower case letters, digits and underscores, starting with a letter (at most 64)", name)
	}
	if !risk.Valid() {
		return fmt.Errorf("tool %s: risk %q is not read, low_write or high_write", name, risk)
	}
	return nil
}

// compileSchema compiles a tool's input schema (JSON Schema 2020-12) and
// reads the defaults of its top-level properties.
func compileSchema(name string, schemaJSON []byte) (*validator.Schema, map[string]any, error) {
	doc, err := validator.UnmarshalJSON(bytesReader(schemaJSON))
	if err != nil {
		return nil, nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	c := validator.NewCompiler()
	c.DefaultDraft(validator.Draft2020)
	c.AssertFormat()
	url := "countersign:tool/" + name
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, nil, fmt.Errorf("tool %s: schema does not compile: %w", name, err)
	}
	defaults := map[string]any{}
	if obj, ok := doc.(map[string]any); ok {
		if props, ok := obj["properties"].(map[string]any); ok {
			for k, p := range props {
				if pm, ok := p.(map[string]any); ok {
					if d, ok := pm["default"]; ok {
						defaults[k] = d
					}
				}
			}
		}
	}
	return compiled, defaults, nil
}

// UnknownError says a tool cannot tell whether its call took effect: the
// backend failed or timed out after the request was sent, and the call must
// not be sent again blindly. The call is left `unknown` for a person to
// reconcile; the message is safe to show.
type UnknownError struct{ Message string }

func (e *UnknownError) Error() string { return e.Message }

// DefinitionHash is the SHA-256 (hex) of what a call of the tool was made
// against and an approver decides on: its name, description, risk, whether
// it is idempotent, its input schema and, for a tool of an MCP server, the
// tool as the server listed it (annotations included). A call and each
// approval record it, so that a tool changed since (a reloaded file, an MCP
// server's new list) is seen, and an approved call is not run against
// another definition (agent/gate, ExecuteApproved).
func (t *Tool) DefinitionHash() string {
	if t.definitionHash != "" {
		return t.definitionHash
	}
	return t.hashDefinition()
}

// ListingHash is the SHA-256 (hex) of the tool as its MCP server listed it
// ("" for a tool not from one): what an admin accepts (agent/gate.Gate pins it).
func (t *Tool) ListingHash() string {
	if len(t.Listing) == 0 {
		return ""
	}
	sum := sha256.Sum256(t.Listing)
	return hex.EncodeToString(sum[:])
}

func (t *Tool) hashDefinition() string {
	var schema bytes.Buffer
	if err := json.Compact(&schema, t.Schema); err != nil || schema.Len() == 0 {
		schema.Reset()
		schema.WriteString("null")
	}
	def, _ := json.Marshal(struct {
		Name, Description string
		Risk              Risk
		Idempotent        bool
		Schema            json.RawMessage
		Listing           string `json:",omitempty"`
		Modern            string `json:",omitempty"`
		Target            string `json:",omitempty"`
	}{t.Name, t.Description, t.Risk, t.Idempotent, schema.Bytes(), t.ListingHash(), modernHash(t.ModernWire), t.Target})
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:])
}

// modernHash is the hash of a tool as listed to clients without sessions
// ("": not listed otherwise), so that a pin covers those bytes too.
func modernHash(wire json.RawMessage) string {
	if wire == nil {
		return ""
	}
	sum := sha256.Sum256(wire)
	return hex.EncodeToString(sum[:])
}

// ForRevisions is the tool offered to clients of one revision only (rev;
// "": every revision) and, when modern is not nil, listed to clients
// without sessions in those bytes.
func (t *Tool) ForRevisions(rev string, modern json.RawMessage) *Tool {
	c := *t
	c.Revision, c.ModernWire = rev, modern
	c.definitionHash = c.hashDefinition()
	return &c
}

// Encoded is a tool's result already encoded as valid, compact JSON (as
// json.Marshal writes it): the gate records these bytes as they are,
// without a second pass over a big result.
type Encoded []byte

// MarshalJSON is the value itself.
func (e Encoded) MarshalJSON() ([]byte, error) {
	if len(e) == 0 {
		return []byte("null"), nil
	}
	return e, nil
}
