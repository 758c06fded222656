package outbox

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

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

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

// queueEmail queues an email to each person who should hear of the event:
// those who may decide the action when it waits or is about to expire;
// supervisors and admins when it is overdue.
func (o *Outbox) queueEmail(tx *storage.Tx, n notice) error {
	var role models.StaffRole
	var subject, lead string
	switch n.kind {
	case TypeActionPending:
		role, subject, lead = n.call.RequiredRole, "Approval needed: "+n.summary, "An action waits for your decision."
	case TypeActionReminder:
		role, subject, lead = n.call.RequiredRole, "Expires soon: "+n.summary, "An action expires soon unless someone decides."
	case TypeActionOverdue:
		role, subject, lead = models.Supervisor, "Overdue: "+n.summary, "An action has waited too long for a decision."
	default:
		return nil
	}
	people, err := tx.StaffWhoMayDecide(role)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\nCustomer: %s\nRule: %s (%s)\nApprovals: %d of %d\n", lead, n.summary,
		orAnonymous(n.customer), n.call.Rule, n.call.Reason, n.approved, max(n.call.RequiredApprovals, 1))
	if n.call.RequiredRole != "" {
		fmt.Fprintf(&b, "Needs: %s\n", n.call.RequiredRole)
	}
	if n.call.ExpiresAt != nil {
		fmt.Fprintf(&b, "Expires: %s\n", n.call.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	fmt.Fprintf(&b, "\nOpen it: %s\n", n.link)
	for _, st := range people {
		body, err := json.Marshal(email{To: st.Email, Subject: subject, Text: b.String()})
		if err != nil {
			return err
		}
		if err := tx.Enqueue(&models.Delivery{Channel: channelEmail, Target: st.Email, Event: string(n.kind), Subject: n.call.ID,
			Body: string(body)}); err != nil {
			return err
		}
	}
	return nil
}

func (o *Outbox) sendEmail(ctx context.Context, d models.Delivery) error {
	if o.smtp == nil {
		return permanent{errors.New("email is no longer configured")}
	}
	var m email
	if err := json.Unmarshal([]byte(d.Body), &m); err != nil {
		return permanent{fmt.Errorf("an email that does not decode: %w", err)}
	}
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return permanent{fmt.Errorf("recipient %q: %v", m.To, err)}
	}
	t := o.smtp
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
	if err := c.SendMail(t.from.Address, []string{to.Address}, strings.NewReader(message(t.from, to, m, d.ID, o.store.Now()))); err != nil {
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
