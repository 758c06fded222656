package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// --max-args raises what a call's arguments may be: 1.5 MiB of arguments,
// refused for their size by default, reach the tool's own checks; more
// than the new limit is refused naming it; a limit out of range is a usage
// error.
func TestMaxArgsIsTheOperatorsChoice(t *testing.T) {
	t.Cleanup(func() { tools.MaxArgsBytes = tools.DefaultMaxArgsBytes })
	big := func(n int) string {
		return `{"tool":"get_order_status","args":{"order_id":"` + strings.Repeat("A", n) + `"},"session":"s1","customer_id":"cus_alice"}`
	}
	said := func(app *App, body string) (int, string) {
		key, _, err := app.accounts.AddAgent(context.Background(), fmt.Sprint("bot-", len(body)), models.Actor{ID: "test"})
		if err != nil {
			t.Fatal(err)
		}
		status, out := apiDo(t, "POST", "http://"+app.Addr()+"/api/v1/calls", key, body)
		c, _ := out["call"].(map[string]any)
		e, _ := out["error"].(map[string]any)
		return status, fmt.Sprint(c["error"], e["message"])
	}
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true}, io.Discard)
	if status, out := said(app, big(1536<<10)); !strings.Contains(out, "over the limit of 1048576 bytes") {
		t.Fatalf("1.5 MiB by default: %d %s", status, out)
	}

	app = serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true, MaxArgs: 3 << 20}, io.Discard)
	if status, out := said(app, big(1536<<10)); strings.Contains(out, "over the limit") {
		t.Fatalf("1.5 MiB under --max-args 3 MiB: %d %s", status, out)
	}
	if status, out := said(app, big(3<<20+10)); !strings.Contains(out, "over the limit of 3145728 bytes") {
		t.Fatalf("over 3 MiB under --max-args 3 MiB: %d %s", status, out)
	}
	if out, code := runCmd(t, "serve", "--max-args", "100", "--db", storetest.DSN(t)); code == 0 || !strings.Contains(out, "--max-args 100") {
		t.Fatalf("--max-args 100: %d %s", code, out)
	}
}
