package main

import (
	"context"
	"os"

	"github.com/countersign/countersign/tools"
)

// reloadOnHangup reloads the tools file and the policy file on SIGHUP
// (core.Core.Reload); a refused reload is recorded where people look.
func (a *App) reloadOnHangup(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := a.core.Reload(ctx); err != nil {
				a.core.RecordReloadFailure(ctx, err)
			}
		}
	}
}

// upstreams says how the MCP servers of the tools file in force are doing
// (the core is built after the web side's config that asks).
func (a *App) upstreams() []tools.UpstreamStatus { return a.core.Upstreams() }
