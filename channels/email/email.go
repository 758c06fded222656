// Package email is the channel that writes to staff: who may decide an
// action that waits or is about to expire, supervisors when one is
// overdue, every admin when who may sign changes, and a person alone their
// enrollment link. It speaks SMTP through go-smtp.
package email

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Config is the mail server and who email comes from.
type Config struct {
	// SMTPURL is smtp://user:pass@host:587 (STARTTLS), smtps://… for TLS
	// from the start (--smtp-url); From is the sender (--mail-from).
	SMTPURL string
	From    string
	// Now is the clock of the Date header (nil: time.Now).
	Now func() time.Time
}

// Channel sends email to staff.
type Channel struct {
	t   *smtpTarget
	now func() time.Time
}

// New checks the configuration: nil, nil when no mail server is given.
func New(cfg Config) (*Channel, error) {
	if cfg.SMTPURL == "" {
		return nil, nil
	}
	t, err := parseSMTP(cfg.SMTPURL, cfg.From)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Channel{t: t, now: cfg.Now}, nil
}

// Name is the deliveries' channel.
func (c *Channel) Name() string { return "email" }

// Describe says email reaches staff.
func (c *Channel) Describe() string { return "email to staff" }

// Hears says what staff are written about.
func (c *Channel) Hears(kind outbox.EventType) bool {
	switch kind {
	case outbox.TypeActionPending, outbox.TypeActionReminder, outbox.TypeActionOverdue, outbox.TypeStaffChanged:
		return true
	}
	return false
}

// Queue queues an email to each person who should hear of n.
func (c *Channel) Queue(tx *storage.Tx, n outbox.Notice) error {
	if n.Staff != nil {
		return c.queueStaff(tx, n)
	}
	return c.queueAction(tx, n)
}

// smtpTarget is where email goes: the server, how to reach it, who sends.
type smtpTarget struct {
	addr       string // host:port
	implicit   bool   // smtps: TLS from the first byte
	plain      bool   // no STARTTLS: a relay on this machine, or ?starttls=no
	user, pass string
	from       *mail.Address
}

func parseSMTP(raw, from string) (*smtpTarget, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
		return nil, fmt.Errorf("--smtp-url: want smtp://[user:password@]host[:port] or smtps://…")
	}
	t := &smtpTarget{addr: u.Host, implicit: u.Scheme == "smtps"}
	if u.Port() == "" {
		port := "587"
		if t.implicit {
			port = "465"
		}
		t.addr = net.JoinHostPort(u.Hostname(), port)
	}
	switch u.Query().Get("starttls") {
	case "", "yes":
		ip := net.ParseIP(u.Hostname())
		t.plain = u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
	case "no":
		t.plain = true
	default:
		return nil, errors.New("--smtp-url: starttls=yes or starttls=no")
	}
	if u.User != nil {
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
	}
	if from == "" {
		return nil, errors.New("--smtp-url needs --mail-from: the address email comes from")
	}
	if t.from, err = mail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("--mail-from %q: %v", from, err)
	}
	return t, nil
}

// email is a queued email: one recipient, a subject and a plain text.
type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

// queueAction queues an email to each person who should hear of an
// action: those who may decide it when it waits or is about to expire;
// supervisors and admins when it is overdue.
func (c *Channel) queueAction(tx *storage.Tx, n outbox.Notice) error {
	var role models.StaffRole
	var subject, lead string
	switch n.Kind {
	case outbox.TypeActionPending:
		role, subject, lead = n.Call.RequiredRole, "Approval needed: "+n.Summary, "An action waits for your decision."
	case outbox.TypeActionReminder:
		role, subject, lead = n.Call.RequiredRole, "Expires soon: "+n.Summary, "An action expires soon unless someone decides."
	case outbox.TypeActionOverdue:
		role, subject, lead = models.Supervisor, "Overdue: "+n.Summary, "An action has waited too long for a decision."
	default:
		return nil
	}
	people, err := tx.StaffWhoMayDecide(role)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\nCustomer: %s\nRule: %s (%s)\nApprovals: %d of %d\n", lead, n.Summary,
		n.CustomerOrAnonymous(), n.Call.Rule, n.Call.Reason, n.Approved, n.Required())
	if n.Call.RequiredRole != "" {
		fmt.Fprintf(&b, "Needs: %s\n", n.Call.RequiredRole)
	}
	if n.Call.ExpiresAt != nil {
		fmt.Fprintf(&b, "Expires: %s\n", n.Call.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	fmt.Fprintf(&b, "\nOpen it: %s\n", n.Link)
	for _, st := range people {
		if err := c.enqueue(tx, email{To: st.Email, Subject: subject, Text: b.String()}, string(n.Kind), n.Call.ID); err != nil {
			return err
		}
	}
	return nil
}

// enqueue queues one email.
func (c *Channel) enqueue(tx *storage.Tx, m email, event, subject string) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return tx.Enqueue(&models.Delivery{Channel: c.Name(), Target: m.To, Event: event, Subject: subject, Body: string(body)})
}

// Send sends one email.
func (c *Channel) Send(ctx context.Context, d models.Delivery) (string, error) {
	return "", c.send(ctx, d)
}

func (ch *Channel) send(ctx context.Context, d models.Delivery) error {
	var m email
	if err := json.Unmarshal([]byte(d.Body), &m); err != nil {
		return outbox.Permanent{Err: fmt.Errorf("an email that does not decode: %w", err)}
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return outbox.Permanent{Err: fmt.Errorf("recipient %q: %v", m.To, err)}
	}
	t := ch.t
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	if t.implicit {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: &tls.Config{ServerName: hostOf(t.addr)}}).DialContext(ctx, "tcp", t.addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", t.addr)
	}
	if err != nil {
		return fmt.Errorf("the mail server %s: %v", t.addr, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	var c *smtp.Client
	if t.implicit || t.plain {
		c = smtp.NewClient(conn)
	} else if c, err = smtp.NewClientStartTLS(conn, &tls.Config{ServerName: hostOf(t.addr)}); err != nil {
		conn.Close()
		return fmt.Errorf("the mail server %s: STARTTLS: %v (add ?starttls=no to --smtp-url for a server without TLS)", t.addr, err)
	}
	defer c.Close()
	c.CommandTimeout, c.SubmissionTimeout = 30*time.Second, 30*time.Second
	if t.user != "" {
		if err := c.Auth(sasl.NewPlainClient("", t.user, t.pass)); err != nil {
			return fmt.Errorf("the mail server %s refused the sign-in: %v", t.addr, err)
		}
	}
	if err := c.SendMail(t.from.Address, []string{to.Address}, strings.NewReader(message(t.from, to, m, d.ID, ch.now()))); err != nil {
		return fmt.Errorf("the mail server %s: %v", t.addr, err)
	}
	return c.Quit()
}

// message is an RFC 5322 message of plain UTF-8 text.
func message(from, to *mail.Address, m email, id int64, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <delivery-%d.%d@countersign>\r\n",
		from.String(), to.String(), mime.QEncoding.Encode("utf-8", m.Subject), at.Format(time.RFC1123Z), id, at.UnixNano())
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n"))
	return b.String()
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}
