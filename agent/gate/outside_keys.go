package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// MaxIdempotencyKey is the longest Idempotency-Key an agent may send.
const MaxIdempotencyKey = 200

// keyed puts a call sent with an Idempotency-Key through the gate: a key
// not seen before says the agent means this action, even when the same
// one was decided before (a new intent); a key used before is the call it
// made when the request is the same (SameKey), and a different request
// under it is refused, as Stripe does, instead of being answered with a
// call it did not ask for. The key is the agent's own: another agent's
// same key is another call.
func (o *Outside) keyed(ctx context.Context, req OutsideCall) (Asked, error) {
	k := strings.TrimSpace(req.IdempotencyKey)
	if len(k) > MaxIdempotencyKey {
		return Asked{}, fault.Errorf(fault.Invalid, "the Idempotency-Key is at most %d characters", MaxIdempotencyKey)
	}
	req.Key, req.NewIntent = req.Agent.ID+":"+k, true
	if prior, err := o.Store.CallByAgentKey(ctx, req.Key); err == nil {
		return o.sameKeyAgain(ctx, prior, req)
	}
	asked, err := o.ask(ctx, req)
	if err != nil {
		// The same key at the same moment: the first one won.
		if prior, perr := o.Store.CallByAgentKey(ctx, req.Key); perr == nil {
			return o.sameKeyAgain(ctx, prior, req)
		}
	}
	return asked, err
}

// sameKeyAgain is the call an Idempotency-Key made, for the same request
// asked again; a different request under the key is a conflict that names
// what differed.
func (o *Outside) sameKeyAgain(ctx context.Context, prior *models.ToolCall, req OutsideCall) (Asked, error) {
	run, err := o.Store.Run(ctx, prior.RunID)
	if err != nil {
		return Asked{}, err
	}
	var differs []string
	if req.Tool != prior.Tool {
		differs = append(differs, "tool")
	}
	if !sameJSON(req.Args, prior.RawArgs) {
		differs = append(differs, "args")
	}
	if req.Session != run.Session {
		differs = append(differs, "session")
	}
	if req.CustomerID != prior.CustomerID {
		differs = append(differs, "customer_id")
	}
	if req.Context != prior.Context {
		differs = append(differs, "context")
	}
	if len(differs) > 0 {
		return Asked{}, fault.Errorf(fault.Conflict, "this Idempotency-Key was already used for call %s, whose %s differed; send a new key for a new call",
			prior.ID, strings.Join(differs, " and "))
	}
	return Asked{Call: prior, Session: run.Session, SameKey: true}, nil
}

// sameJSON says whether two JSON texts hold the same value (key order and
// spacing aside); an absent value is the empty object the call was made with.
func sameJSON(a []byte, b string) bool {
	decode := func(raw []byte) (any, bool) {
		if len(raw) == 0 {
			raw = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, okA := decode(a)
	vb, okB := decode([]byte(b))
	if !okA || !okB {
		return string(a) == b
	}
	return reflect.DeepEqual(va, vb)
}
