package outbox_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
)

// An account made on the host is marked so and told to every webhook as
// staff.changed, once, whichever instance finds it; a change proposed in
// the back office is told too, and neither carries a link or a password.
func TestAccountsMadeOnTheHostAreTold(t *testing.T) {
	rcv := &outboxtest.Receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{Base: "https://cs.example"}, hooks(t, "whsec-test", srv.URL))
	ctx := context.Background()
	svc := accounts.New(e.Store)
	svc.Mailer = e.Out
	ada, err := svc.AddStaff(ctx, "ada@x.test", "Ada", models.Admin, "a long enough password", accounts.HostActor)
	if err != nil || ada.Origin != models.OriginHost {
		t.Fatalf("add on the host: %v %+v", err, ada)
	}
	for range 2 {
		if _, err := e.Store.TellHostAccounts(ctx, e.Out.TellHostAccount); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Propose(ctx, accounts.ChangeRequest{Kind: models.ChangeAdd, Email: "new@x.test", Role: models.Approver}, ada.Actor()); err != nil {
		t.Fatal(err)
	}
	e.Deliver()
	got := rcv.All()
	if len(got) != 2 {
		t.Fatalf("deliveries: %d", len(got))
	}
	var host, proposed outbox.Event
	_ = json.Unmarshal(got[0].Body, &host)
	_ = json.Unmarshal(got[1].Body, &proposed)
	if host.Staff != nil && host.Staff.Via != "host" {
		host, proposed = proposed, host // deliveries of two subjects go out side by side
	}
	if host.Type != outbox.TypeStaffChanged || host.Staff == nil || host.Staff.Via != "host" || host.Staff.Email != "ada@x.test" ||
		host.Staff.URL != "https://cs.example/staff" {
		t.Fatalf("the host's account: %s", got[0].Body)
	}
	if proposed.Staff == nil || proposed.Staff.Status != "proposed" || proposed.Staff.Kind != "add" || proposed.Staff.ProposedBy != "Ada" {
		t.Fatalf("the proposal: %s", got[1].Body)
	}
	for _, g := range got {
		if strings.Contains(string(g.Body), "enr_") || strings.Contains(string(g.Body), "password") {
			t.Fatalf("a webhook carries a secret: %s", g.Body)
		}
	}
}
