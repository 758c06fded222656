// Package webtest boots the one root (web.Boot) as `countersign serve`
// does, for the web side's tests and the benchmark
// programs that serve the product over httptest. Start and Close are the
// core's.
package webtest

import (
	"context"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/web"
)

// New builds the core and the web side's handlers over it; w's Log
// defaults to the core's. A config the core refuses (a policy change
// signed by one person without SinglePersonShop) panics: it is the
// caller's mistake.
func New(c core.Config, w web.Config) (*core.Core, *web.Server) {
	if w.Log == nil {
		w.Log = c.Log
	}
	co, site, err := web.Boot(context.Background(), c, w)
	if err != nil {
		panic(err)
	}
	return co, site
}
