// Package chat is the customers' door: the chat widget a shop embeds (the
// script, the frame on Countersign's own origin, its live log), the demo
// shop's page, and the runs API a shop's backend talks to a conversation
// by. Who the customer is comes from the token the shop signs
// (CustomerVerifier); a conversation's new turns reach its streams from
// the core's bus (the door hears core.RunTurns).
package chat

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Options is how the customers' door is set up.
type Options struct {
	// Customers checks the tokens shops sign for their customers.
	Customers *CustomerVerifier
	// WidgetOrigins may embed the chat frame (frame-ancestors).
	WidgetOrigins []string
	// DemoSecret signs demo customer tokens for /demo, and is never the
	// shop's customer secret; empty: no demo page. Customers must accept
	// it for the demo customers (CustomerVerifier.AcceptDemo).
	DemoSecret string
	// DemoCustomers are who /demo lets a visitor be.
	DemoCustomers []DemoCustomer
	// ReplyWait is how long a request that starts model work waits for the
	// reply before it answers (the rest arrives on the stream).
	ReplyWait time.Duration
	// ChatGrantSeed, when set, makes the chat frames' grants valid across
	// restarts and instances (empty: a key of this process's own).
	ChatGrantSeed []byte
}

// DemoCustomer is one customer of the demo shop, as /demo offers them.
type DemoCustomer struct {
	ID, Name string
	About    string // their orders, in a line
}

// Door is the customers' door's handlers.
type Door struct {
	kit  *doorkit.Kit
	core *core.Core
	opts Options
	// runs fans a run's new turns out to the streams that follow it.
	runs *Broker
	// Messages per client address and per conversation (chat and runs API).
	perAddress, perRun *doorkit.Limiter
	// grantKey signs chat grants (grant.go).
	grantKey []byte
}

// Mount adds the widget's, the chat frame's and the runs API's routes to
// e, and listens on the core's bus for the runs' new turns.
func Mount(e *echo.Echo, kit *doorkit.Kit, opts Options) *Door {
	if opts.Customers == nil {
		opts.Customers = NewCustomerVerifier("")
	}
	if opts.ReplyWait == 0 {
		opts.ReplyWait = 20 * time.Second
	}
	d := &Door{kit: kit, core: kit.Core, opts: opts, runs: NewBroker(), grantKey: newGrantKey(opts.ChatGrantSeed),
		perAddress: kit.Limiter(3*time.Second, 20, "chat_ip"), // 20 at once, then 20 a minute per address
		perRun:     kit.Limiter(4*time.Second, 8, "chat_run"), // 8 at once, then 15 a minute per conversation
	}
	e.GET(views.PathWidget, d.widgetJS)
	e.GET(views.PathDemo, d.demoPage)
	e.GET(views.PathChat, d.chatPage, d.chatHeaders)
	e.GET(views.PathChatEvents, d.chatEvents, d.chatHeaders, kit.LimitStreams)
	e.POST(views.PathChatMessages, d.chatMessage, d.chatHeaders)
	e.POST(views.PathChatIdentity, d.chatIdentity, d.chatHeaders)
	e.POST(views.PathAPIRuns, d.runCreate)
	e.GET(views.PathAPIRun, d.runGet, d.requireRunToken)
	e.POST(views.PathAPIRunMessages, d.runMessage, d.requireRunToken)
	e.GET(views.PathAPIRunEvents, d.runEvents, d.requireRunToken, kit.LimitStreams)
	kit.Core.Bus.Listen(d)
	return d
}

// RunChanged implements core.RunTurns: the streams that follow the run
// hear it.
func (d *Door) RunChanged(ev runloop.Event) { d.runs.Publish(ev) }
