package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
)

// The audit search's FTS5 trigram index finds exactly the calls a LIKE over
// every call finds, for text of every kind (case, quotes, the index's own
// syntax, accents, JSON punctuation), before and after the indexer has put
// the calls in it, and follows a call whose arguments staff edited: the old
// text no longer finds it, the new one does.
func TestTheTextIndexFindsWhatLikeFinds(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "search.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	needFTS5(t, s)
	ctx := context.Background()
	args := []string{
		`{"order_id":"A1002","reason":"Arrived BROKEN"}`,
		`{"order_id":"B2001","reason":"said \"no\" twice"}`,
		`{"path":"/tmp/notes.txt","content":"NEAR AND OR NOT * ^ : ( )"}`,
		`{"name":"Zoë Ångström","city":"Malmö"}`,
		`{"amount":1200.5,"note":"50% off_sale"}`,
		``,
	}
	err = s.Write(ctx, func(tx *Tx) error {
		if err := tx.CreateRun(&models.Run{ID: "run_1", Status: models.RunActive}); err != nil {
			return err
		}
		for i, a := range args {
			c := &models.ToolCall{ID: fmt.Sprintf("call_%d", i), RunID: "run_1", Tool: "t", Status: models.CallPending, Args: a, RawArgs: a + " raw"}
			if a == "" {
				c.RawArgs = `{"order_id": "A1002" ` // what a model sent that did not parse
			}
			if err := tx.CreateToolCall(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	like := func(text string) []string {
		var ids []string
		pat := "%" + escapeLike(text) + "%"
		s.db.Raw(`SELECT id FROM tool_calls WHERE args LIKE ? ESCAPE '\' OR raw_args LIKE ? ESCAPE '\' ORDER BY id`, pat, pat).Scan(&ids)
		return ids
	}
	found := func(text string) []string {
		rows, err := s.AuditCalls(ctx, models.AuditQuery{Text: text, Limit: 100})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return ids
	}
	texts := []string{"a1002", "A1002", "broken", `"no"`, `said "no`, "NEAR AND", "* ^ :", "( )", "notes.txt", "Malm",
		`"order_id":"B`, "50% off", "off_sale", "1200.5", "raw", "A1002\" ", "nowhere", "xyz", "e\u0301", `\`, "ab", "\"\"\"", "ö", "ÖM"}
	// First while the calls are newer than the index (read directly), then
	// once the indexer has put them in it.
	for _, when := range []string{"before indexing", "from the index"} {
		if when == "from the index" {
			// (The store's own indexer may have run already.)
			for n := 1; n > 0; {
				if n, err = s.IndexText(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var indexed, last int
			s.db.Raw(`SELECT indexed FROM audit_text_state`).Scan(&indexed)
			s.db.Raw(`SELECT max(id) FROM audit_text_keys`).Scan(&last)
			if indexed != last || last != len(args) {
				t.Fatalf("indexed up to %d of %d calls, want all %d", indexed, last, len(args))
			}
		}
		for _, text := range texts {
			if want, got := like(text), found(text); !slices.Equal(got, want) {
				t.Errorf("%s, %q: the search found %v, LIKE finds %v", when, text, got, want)
			}
		}
	}
	// The trigram index is what answers, not a scan.
	var plan []struct{ Detail string }
	s.db.Raw(`EXPLAIN QUERY PLAN SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH ?`, `"A1002"`).Scan(&plan)
	if !slices.ContainsFunc(plan, func(p struct{ Detail string }) bool { return strings.HasPrefix(p.Detail, "SCAN t VIRTUAL TABLE INDEX") }) {
		t.Errorf("the search's plan does not use the index: %+v", plan)
	}
	// Staff edit a call: its old arguments no longer find it, its new ones do.
	err = s.Write(ctx, func(tx *Tx) error {
		return tx.EditPendingCall("call_0", models.CallEdit{Args: `{"order_id":"A1002","reason":"dented lid"}`, OriginalArgs: args[0], RequiredApprovals: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"dented", "BROKEN", "A1002"} {
		if want, got := like(text), found(text); !slices.Equal(got, want) {
			t.Errorf("after the edit, %q: the search found %v, LIKE finds %v", text, got, want)
		}
	}
	for n := 1; n > 0; {
		if n, err = s.IndexText(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range []string{"dented", "BROKEN", "A1002"} {
		if want, got := like(text), found(text); !slices.Equal(got, want) {
			t.Errorf("after the edit, indexed, %q: the search found %v, LIKE finds %v", text, got, want)
		}
	}
	// The index itself holds the edit (the search checks with LIKE what it
	// proposes, so ask it alone).
	var hits []string
	s.db.Raw(`SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH '"dented"'`).Scan(&hits)
	if !slices.Equal(hits, []string{"call_0"}) {
		t.Errorf("the index does not hold the edited arguments: %v", hits)
	}
}

// needFTS5 stops a test that needs the index when the driver lacks FTS5:
// it fails in CI, whose build has the tag (the Makefile gives it).
func needFTS5(t *testing.T, s *Store) {
	t.Helper()
	if ok, err := hasFTS5(s.db); err != nil || !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the SQLite driver has no FTS5 (%v): build with -tags %s", err, BuildTag)
		}
		t.Skipf("the SQLite driver has no FTS5: run with -tags %s", BuildTag)
	}
}

// A binary without FTS5 opening the file takes the index's triggers away;
// meanwhile the search reads the calls, and finds them all; the next binary
// with FTS5 makes the index again, with the calls written in between.
func TestTheTextIndexIsMadeAgainAfterABuildWithoutIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "search.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	needFTS5(t, s)
	ctx := context.Background()
	add := func(s *Store, id, args string) {
		t.Helper()
		err := s.Write(ctx, func(tx *Tx) error {
			if err := tx.CreateRun(&models.Run{ID: "run_" + id, Status: models.RunActive}); err != nil {
				return err
			}
			return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: "run_" + id, Tool: "t", Status: models.CallPending, Args: args, RawArgs: args})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	found := func(s *Store, text string) []string {
		t.Helper()
		rows, err := s.AuditCalls(ctx, models.AuditQuery{Text: text, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return ids
	}
	add(s, "call_1", `{"order_id":"Q7001"}`)
	if !s.TextIndexed() {
		t.Fatal("a new file has no text index")
	}
	// What a build without FTS5 does when it opens the file.
	err = s.Write(ctx, func(tx *Tx) error {
		for _, tr := range textTriggers {
			if _, err := tx.exec("DROP TRIGGER " + tr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	add(s, "call_2", `{"order_id":"Q7002"}`)
	if s.TextIndexed() || !slices.Equal(found(s, "Q700"), []string{"call_1", "call_2"}) {
		t.Fatalf("without its triggers the index is used (%v) or the search misses a call: %v", s.TextIndexed(), found(s, "Q700"))
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add(s, "call_3", `{"order_id":"Q7003"}`)
	if !s.TextIndexed() || !slices.Equal(found(s, "Q700"), []string{"call_1", "call_2", "call_3"}) {
		t.Fatalf("the index was not made again with every call: indexed %v, found %v", s.TextIndexed(), found(s, "Q700"))
	}
}
