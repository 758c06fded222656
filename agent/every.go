package agent

import (
	"context"
	"time"
)

// Every calls do every d, the first time d from now, until ctx ends: the
// one ticker loop of the background jobs (the core's sweep, heartbeat and
// checkpoints, the web side's revoked keys and shared rate limits), each
// started and stopped as a job of the core.
func Every(ctx context.Context, d time.Duration, do func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			do(ctx)
		}
	}
}
