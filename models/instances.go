package models

import (
	"time"
)

// Several servers may share one PostgreSQL database. Each is an instance:
// it beats in the instances table while it runs, and the calls it starts
// running are its own (tool_calls.owner). When it stops beating, another
// instance takes over what it left: calls caught running are recovered
// (OrphanedCalls), runs it was stepping are leased again (LeaseRun).

// BeatEvery is how often a server sharing PostgreSQL beats; InstanceAlive
// is how long after its last beat an instance counts as gone.
const (
	BeatEvery     = 5 * time.Second
	InstanceAlive = 20 * time.Second
)
