package outbox_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// teams is a channel of a test's own, as a new package under channels/
// would be one: the outbox queues what it says, sends it through it, and
// offers its inbound route and its jobs, knowing nothing else of it.
type teams struct {
	mu   sync.Mutex
	sent []models.Delivery
}

func (c *teams) Name() string                     { return "teams" }
func (c *teams) Describe() string                 { return "Microsoft Teams" }
func (c *teams) Hears(kind outbox.EventType) bool { return kind == outbox.TypeActionPending }
func (c *teams) Jobs() []outbox.Job {
	return []outbox.Job{{Name: "teams cards", Run: func(context.Context) {}}}
}
func (c *teams) Route(outbox.Desk) (string, http.Handler) {
	return "/integrations/teams/cards", http.NotFoundHandler()
}

func (c *teams) Link() outbox.Link {
	return outbox.Link{Channel: c.Name(), Label: "Teams user", Example: "29:1a2b", Check: func(s string) (string, error) { return s, nil }}
}
func (c *teams) Queue(tx *storage.Tx, n outbox.Notice) error {
	return tx.Enqueue(&models.Delivery{Channel: c.Name(), Target: "teams", Event: string(n.Kind), Subject: n.Subject(), Body: n.Summary})
}

func (c *teams) Send(_ context.Context, d models.Delivery) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, d)
	return "card-1", nil
}

// A channel is one type behind the outbox's interface: registered, it
// hears what it says it hears, sends its deliveries, and its route and jobs
// reach the web side and the root, and the people it links have a column
// on the staff page, with no change anywhere else.
func TestAChannelIsOnePackageAndItsRegistration(t *testing.T) {
	ch := &teams{}
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{}, func(*storage.Store) outbox.Channel { return ch })
	out := e.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	e.Deliver()
	ch.mu.Lock()
	sent := append([]models.Delivery(nil), ch.sent...)
	ch.mu.Unlock()
	if len(sent) != 1 || sent[0].Subject != out.CallID || sent[0].Body != "Refund $100.00 on order A1001" || sent[0].Event != "action.pending" {
		t.Fatalf("sent through the channel: %+v", sent)
	}
	if ds, _ := e.Store.DeliveriesAbout(context.Background(), out.CallID); len(ds) != 1 || ds[0].Status != models.DeliveryDelivered {
		t.Fatalf("the delivery: %+v", ds)
	}
	if got := e.Out.Channels(); len(got) != 1 || got[0] != "Microsoft Teams" {
		t.Errorf("the staff page names %v", got)
	}
	if jobs := e.Out.Jobs(); len(jobs) != 1 || jobs[0].Name != "teams cards" {
		t.Errorf("jobs for the root: %+v", jobs)
	}
	if routes := e.Out.Routes(); len(routes) != 0 {
		t.Errorf("routes with no desk attached: %+v", routes)
	}
	if links := e.Out.Links(); len(links) != 1 || links[0].Channel != "teams" || links[0].Label != "Teams user" {
		t.Errorf("the staff page's link columns: %+v", links)
	}
	e.Out.Attach(e.Gate.Tools, nil, e.Gate.AsksPasskeyOf, deskOf{})
	if routes := e.Out.Routes(); len(routes) != 1 || routes[0].Path != "/integrations/teams/cards" || routes[0].Channel != "teams" {
		t.Errorf("routes for the web side: %+v", routes)
	}
}

// deskOf is a desk that decides nothing (the route is not called here).
type deskOf struct{}

func (deskOf) Approve(context.Context, string, models.Actor, string) error { return nil }
func (deskOf) Reject(context.Context, string, models.Actor, string) error  { return nil }
func (deskOf) View(context.Context, string, string) (outbox.Notice, error) {
	return outbox.Notice{}, nil
}
func (deskOf) Store() *storage.Store { return nil }
