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
			if err := tx.Audit(models.Event{Actor: "model", Kind: models.EventCallPending, Subject: c.ID}); err != nil {
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
	// once the follower has put them in it.
	for _, when := range []string{"before indexing", "from the index"} {
		if when == "from the index" {
			if err := s.FollowAll(ctx); err != nil {
				t.Fatal(err)
			}
			var followed, keys int
			s.db.Raw(`SELECT seq FROM derived_marks WHERE name = ? AND chain = 0`, markText).Scan(&followed)
			s.db.Raw(`SELECT count(*) FROM audit_text_keys`).Scan(&keys)
			if followed != len(args) || keys != len(args) {
				t.Fatalf("followed %d events and indexed %d calls, want all %d", followed, keys, len(args))
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
		if err := tx.EditPendingCall("call_0", models.CallEdit{Args: `{"order_id":"A1002","reason":"dented lid"}`, ArgsHash: "edited",
			OriginalArgs: args[0], RequiredApprovals: 1}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "staff", Kind: models.EventActionEdited, Subject: "call_0"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"dented", "BROKEN", "A1002"} {
		if want, got := like(text), found(text); !slices.Equal(got, want) {
			t.Errorf("after the edit, %q: the search found %v, LIKE finds %v", text, got, want)
		}
	}
	if err := s.FollowAll(ctx); err != nil {
		t.Fatal(err)
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

// A binary without FTS5 leaves the index be and does not follow it;
// meanwhile the search reads the calls, and finds them all; the next binary
// with FTS5 takes the index up from where it was, with the calls written in
// between. A file of the layout before the follower (keys without the
// arguments' version, kept by triggers) is made again.
func TestTheTextIndexCatchesUpAfterABuildWithoutIt(t *testing.T) {
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
			if err := tx.CreateToolCall(&models.ToolCall{ID: id, RunID: "run_" + id, Tool: "t", Status: models.CallPending, Args: args, RawArgs: args}); err != nil {
				return err
			}
			return tx.Audit(models.Event{Actor: "model", Kind: models.EventCallPending, Subject: id})
		})
		if err == nil {
			err = s.FollowAll(ctx)
		}
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
	indexed := func(s *Store) []string {
		var ids []string
		s.db.Raw(`SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH '"Q700"' ORDER BY 1`).Scan(&ids)
		return ids
	}
	add(s, "call_1", `{"order_id":"Q7001"}`)
	if !s.TextIndexed() || !slices.Equal(indexed(s), []string{"call_1"}) {
		t.Fatalf("a new file's index is not kept: %v, %v", s.TextIndexed(), indexed(s))
	}
	s.textKept = false // what a build without FTS5 is
	add(s, "call_2", `{"order_id":"Q7002"}`)
	if !slices.Equal(indexed(s), []string{"call_1"}) || !slices.Equal(found(s, "Q700"), []string{"call_1", "call_2"}) {
		t.Fatalf("without FTS5 the index moved (%v) or the search misses a call: %v", indexed(s), found(s, "Q700"))
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	add(s, "call_3", `{"order_id":"Q7003"}`)
	want := []string{"call_1", "call_2", "call_3"}
	if !s.TextIndexed() || !slices.Equal(indexed(s), want) || !slices.Equal(found(s, "Q700"), want) {
		t.Fatalf("the index did not catch up: indexed %v, found %v", indexed(s), found(s, "Q700"))
	}
	// The layout before the follower.
	for _, q := range []string{`DROP TABLE audit_text_keys`, `CREATE TABLE audit_text_keys (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL)`,
		`CREATE TABLE audit_text_state (id INTEGER PRIMARY KEY CHECK (id = 1), indexed INTEGER NOT NULL)`, `DROP TABLE audit_text`,
		`CREATE VIRTUAL TABLE audit_text USING fts5(args, raw_args, content='', tokenize='trigram')`} {
		if err := s.db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !slices.Equal(indexed(s), want) || !slices.Equal(found(s, "Q700"), want) {
		t.Fatalf("the index of the old layout was not made again: indexed %v, found %v", indexed(s), found(s, "Q700"))
	}
}
