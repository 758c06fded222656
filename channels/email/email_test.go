package email

import (
	"context"
	"errors"
	"io"
	"net"
	"net/mail"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// mailbox is a real SMTP server (go-smtp) that keeps what it receives and
// wants a password.
type mailbox struct {
	mu   sync.Mutex
	msgs []mailed
}

type mailed struct {
	from string
	to   []string
	msg  *mail.Message
	body string
}

type mailSession struct {
	box    *mailbox
	authed bool
	cur    mailed
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: b}, nil }

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *mailSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "countersign" || pass != "mail-pass" {
			return errors.New("bad credentials")
		}
		s.authed = true
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.cur.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(m.Body)
	s.cur.msg, s.cur.body = m, string(body)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.cur)
	s.box.mu.Unlock()
	s.cur = mailed{}
	return nil
}

func (s *mailSession) Reset()        { s.cur = mailed{} }
func (s *mailSession) Logout() error { return nil }

func startMailbox(t *testing.T) (*mailbox, string) {
	t.Helper()
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain, srv.AllowInsecureAuth = "localhost", true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return box, l.Addr().String()
}

func (b *mailbox) to() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.msgs {
		out = append(out, m.to...)
	}
	sort.Strings(out)
	return out
}

// An action that waits is emailed, through a real SMTP server that wants a
// password, to each enabled account whose role may decide it (a
// supervisor's action to supervisors and admins only); the email says what
// it asks and links to it. A wrong password is a failed, retried delivery.
func TestEmailReachesThoseWhoMayDecide(t *testing.T) {
	box, addr := startMailbox(t)
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{}, mailer(t, "smtp://countersign:mail-pass@"+addr, "Countersign <cs@shop.example>"))
	e.Staff(models.Approver, "ann@shop.example", "Ann")
	e.Staff(models.Supervisor, "sue@shop.example", "Sue")
	e.Staff(models.Admin, "ada@shop.example", "Ada")
	e.Staff(models.Auditor, "otto@shop.example", "Otto")
	gone := e.Staff(models.Approver, "gone@shop.example", "Gone")
	disabled := true
	if err := e.Store.UpdateStaff(context.Background(), gone.ID, nil, &disabled, "test"); err != nil {
		t.Fatal(err)
	}
	e.Deliver() // disabling an account is told to every admin
	if got := strings.Join(box.to(), " "); got != "ada@shop.example" || box.msgs[0].msg.Header.Get("Subject") != "Staff change: disabling gone@shop.example" {
		t.Fatalf("disabling mailed to %q: %q", got, box.msgs[0].msg.Header.Get("Subject"))
	}
	box.mu.Lock()
	box.msgs = nil
	box.mu.Unlock()
	small := e.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	e.Deliver()
	if got := strings.Join(box.to(), " "); got != "ada@shop.example ann@shop.example sue@shop.example" {
		t.Fatalf("mailed to %s", got)
	}
	m := box.msgs[0]
	if m.from != "cs@shop.example" || m.msg.Header.Get("Subject") != "Approval needed: Refund $100.00 on order A1001" ||
		!strings.Contains(m.body, "Customer: Alice") || !strings.Contains(m.body, "https://cs.example/actions/"+small.CallID) {
		t.Fatalf("the email: from %s, subject %q\n%s", m.from, m.msg.Header.Get("Subject"), m.body)
	}

	box.mu.Lock()
	box.msgs = nil
	box.mu.Unlock()
	e.Refund("cus_bob", "Bob", `{"order_id":"B2001","amount":1200}`)
	e.Deliver()
	if got := strings.Join(box.to(), " "); got != "ada@shop.example sue@shop.example" {
		t.Fatalf("a supervisor's action mailed to %s", got)
	}

	wrong := outboxtest.New(t, "", demo.Shop, outbox.Config{}, mailer(t, "smtp://countersign:wrong@"+addr, "cs@shop.example"))
	wrong.Staff(models.Approver, "ann@shop.example", "Ann")
	out := wrong.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	wrong.Deliver()
	ds, _ := wrong.Store.DeliveriesAbout(context.Background(), out.CallID)
	if len(ds) != 1 || ds[0].Status != models.DeliveryQueued || ds[0].Attempts != 1 || !strings.Contains(ds[0].LastError, "refused the sign-in") ||
		strings.Contains(ds[0].LastError, "wrong") {
		t.Fatalf("a refused sign-in: %+v", ds)
	}
}

// An enrollment link is a credential until it is spent: the email carries
// it to its person through a real SMTP server, and the delivery kept
// afterwards (for the log, in every backup) holds it no longer; one that
// waits to be tried again keeps it until it ends.
func TestAnEmailedEnrollmentLinkIsNotKeptOnceSent(t *testing.T) {
	box, addr := startMailbox(t)
	ctx := context.Background()
	const link = "https://cs.example/enroll/enr_secret_one_time_link"
	queue := func(e *outboxtest.Env, to *models.Staff) {
		if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
			return e.Out.QueueEnrollment(tx, to, link, "add", time.Now().Add(time.Hour))
		}); err != nil {
			t.Fatal(err)
		}
	}
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{}, mailer(t, "smtp://countersign:mail-pass@"+addr, "cs@shop.example"))
	nia := e.Staff(models.Approver, "nia@shop.example", "Nia")
	queue(e, nia)
	e.Deliver()
	box.mu.Lock()
	if len(box.msgs) != 1 || !strings.Contains(box.msgs[0].body, link) {
		t.Fatalf("the link was not mailed: %+v", box.msgs)
	}
	box.mu.Unlock()
	ds, _ := e.Store.DeliveriesAbout(ctx, nia.ID)
	if len(ds) != 1 || ds[0].Status != models.DeliveryDelivered || strings.Contains(ds[0].Body, "enr_") {
		t.Fatalf("the sent enrollment email is kept with its link: %+v", ds)
	}

	wrong := outboxtest.New(t, "", demo.Shop, outbox.Config{}, mailer(t, "smtp://countersign:wrong@"+addr, "cs@shop.example"))
	ned := wrong.Staff(models.Approver, "ned@shop.example", "Ned")
	queue(wrong, ned)
	wrong.Deliver()
	if ds, _ := wrong.Store.DeliveriesAbout(ctx, ned.ID); len(ds) != 1 || ds[0].Status != models.DeliveryQueued || !strings.Contains(ds[0].Body, "enr_") {
		t.Fatalf("a delivery to be tried again must keep what it sends: %+v", ds)
	}
}

// mailer is email through the server at smtpURL, on the env's clock.
func mailer(t testing.TB, smtpURL, from string) func(*storage.Store) outbox.Channel {
	return func(store *storage.Store) outbox.Channel {
		ch, err := New(Config{SMTPURL: smtpURL, From: from, Now: store.Now})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}
