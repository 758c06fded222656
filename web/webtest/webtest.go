// Package webtest builds a core and its web side the way `countersign
// serve` does (cmd/countersign: the notifier, the core that tells it, the
// web server over both, then their background jobs), for the tests and the
// benchmark programs that serve the product over httptest.
package webtest

import (
	"context"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/web"
)

// App is a core and its web side over one store.
type App struct {
	Core    *core.Core
	Changes *web.Changes
	Server  *web.Server
	store   *storage.Store
	stop    context.CancelFunc
}

// New wires them; w's Log defaults to the core's.
// A config the core refuses (a policy change signed by one person without
// SinglePersonShop) panics: it is the caller's mistake.
func New(c core.Config, w web.Config) *App {
	if w.Log == nil {
		w.Log = c.Log
	}
	changes := web.NewChanges(w.Log)
	c.Notifier = changes
	co, err := core.New(c)
	if err != nil {
		panic(err)
	}
	return &App{Core: co, Changes: changes, Server: web.NewFor(co, c.Store, changes, w), store: c.Store, stop: func() {}}
}

// Start carries on what a previous process left and starts the background
// jobs of both sides, until Close.
func (a *App) Start(ctx context.Context) (core.Started, error) {
	ctx, a.stop = context.WithCancel(ctx)
	st, err := a.Core.Start(ctx)
	if err != nil {
		return st, err
	}
	go a.Server.Run(ctx)
	if a.store.Shared() {
		a.Changes.Share(ctx, a.store)
	}
	return st, nil
}

// Close stops both sides' jobs and the core; the store stays open.
func (a *App) Close() {
	a.stop()
	a.Core.Close()
}
