package main

import (
	"io"
	"slices"
	"testing"
)

// Flags may follow a command's arguments, as they may everywhere else
// ("agent revoke NAME --db FILE" failed with "takes the agent's name").
func TestFlagsMayFollowArguments(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"bot", "--db", "x.db"}, []string{"--db", "x.db", "--", "bot"}},
		{[]string{"--db=x.db", "bot"}, []string{"--db=x.db", "--", "bot"}},
		{[]string{"bot", "--demo", "more"}, []string{"--demo", "--", "bot", "more"}},
		{[]string{"--db", "x.db"}, []string{"--db", "x.db"}},
		{[]string{"bot", "--", "--db"}, []string{"--", "bot", "--db"}},
	} {
		fs, _ := newFlagSet("t", io.Discard)
		fs.Bool("demo", false, "")
		if got := flagsFirst(fs, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
	fs, cfg := newFlagSet("agent revoke", io.Discard)
	if err := parse(fs, []string{"bot", "--db", "x.db"}); err != nil || cfg.DB != "x.db" || fs.NArg() != 1 || fs.Arg(0) != "bot" {
		t.Fatalf("parse: %v db %q args %q", err, cfg.DB, fs.Args())
	}
}
