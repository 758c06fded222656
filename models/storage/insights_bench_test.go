package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
)

// BenchmarkInsights reads the rows the insights page is summed from
// (InsightCounts, InsightVerdicts; agent/insights sums them as they come)
// over a history of 1,000,000 calls made in the last 30 days: five tools,
// eight rules; 80% allowed, 15% held (of which 80% approved, 15% rejected,
// 5% expired; one in ten approved by two people), 5% denied. The target is
// under 300 ms per page.
//
//	go test ./models -run XXX -bench BenchmarkInsights -benchtime 10x
func BenchmarkInsights(b *testing.B) {
	const calls = 1_000_000
	s, err := Open(filepath.Join(b.TempDir(), "insights.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	seedHistory(b, s, calls)
	ctx := context.Background()
	// The seed wrote past the store (no event names its calls): the
	// derived data (counts by hour, the search's index) is made from the
	// calls first, background work of its own, not the page's.
	if err := s.Rederive(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded and indexed %d calls in %s", calls, time.Since(start).Round(time.Second))
	q := InsightsQuery{Since: time.Now().Add(-720 * time.Hour)}
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			counts, verdicts, err := readInsightRows(ctx, s, q)
			if err != nil || counts == 0 || verdicts == 0 {
				b.Fatal(err, counts, verdicts)
			}
		}
	})
	b.Run("one tool in amount bands", func(b *testing.B) {
		q := InsightsQuery{Since: q.Since, Tool: "issue_refund", Field: "amount", Bands: []float64{50, 200, 1000}}
		for b.Loop() {
			if _, _, err := readInsightRows(ctx, s, q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// readInsightRows reads what the page reads, counting the verdicts in
// each part as agent/insights sums them.
func readInsightRows(ctx context.Context, s *Store, q InsightsQuery) (counts int, verdicts int64, err error) {
	rows, err := s.InsightCounts(ctx, q)
	if err != nil {
		return 0, 0, err
	}
	var parts []*int64
	err = s.InsightVerdicts(ctx, q, func(int) func(Verdict) {
		n := new(int64)
		parts = append(parts, n)
		return func(Verdict) { *n++ }
	})
	for _, n := range parts {
		verdicts += *n
	}
	return len(rows), verdicts, err
}

// seedHistory writes n calls, and the approvals of those held, straight
// into the tables in one transaction.
func seedHistory(b testing.TB, s *Store, n int) {
	b.Helper()
	db, err := s.db.DB()
	if err != nil {
		b.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO runs (id, customer_id, customer_name, channel, status, created_at, updated_at) VALUES ('run_bench', 'cus_b', 'B', 'api', 'active', ?, ?)`,
		time.Now(), time.Now()); err != nil {
		b.Fatal(err)
	}
	call, err := tx.Prepare(`INSERT INTO tool_calls (id, run_id, customer_id, tool, risk, args, status, decision, rule, policy_version, created_at, updated_at)
		VALUES (?, 'run_bench', 'cus_b', ?, 'high_write', ?, ?, ?, ?, 'v', ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	appr, err := tx.Prepare(`INSERT INTO approvals (tool_call_id, staff_id, staff_name, staff_role, verdict, edited, created_at, tool, rule, took_s, settled_s)
		VALUES (?, ?, ?, 'approver', ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	toolNames := []string{"issue_refund", "cancel_order", "change_address", "get_order_status", "send_voucher"}
	r := rand.New(rand.NewPCG(1, 2))
	begin := time.Now().Add(-29 * 24 * time.Hour)
	step := 29 * 24 * time.Hour / time.Duration(n)
	for i := range n {
		at := begin.Add(time.Duration(i) * step).UTC()
		tool := toolNames[r.IntN(len(toolNames))]
		args := fmt.Sprintf(`{"order_id":"A%d","amount":%d}`, r.IntN(100000), r.IntN(2000))
		id := fmt.Sprintf("call_%09d", i)
		decision, rule, status := models.DecidedAllow, tool+"-allowed", models.CallSucceeded
		switch x := r.IntN(100); {
		case x < 5:
			decision, rule, status = models.DecidedDeny, tool+"-denied", models.CallDenied
		case x < 20:
			decision, rule = models.DecidedNeedsApproval, tool+"-held"
			switch y := r.IntN(100); {
			case y < 80:
				status = models.CallSucceeded
			case y < 95:
				status = models.CallRejected
			default:
				status = models.CallExpired
			}
		}
		if _, err := call.Exec(id, tool, args, status, decision, rule, at, at); err != nil {
			b.Fatal(err)
		}
		if decision != models.DecidedNeedsApproval || status == models.CallExpired {
			continue
		}
		verdict := "approve"
		if status == models.CallRejected {
			verdict = "reject"
		}
		people := 1
		if r.IntN(10) == 0 {
			people = 2
		}
		last := at
		for p := range people {
			staff := r.IntN(12)
			when := last.Add(time.Duration(1+r.IntN(120)) * time.Second)
			var settled *float64
			if p == people-1 {
				s := when.Sub(at).Seconds()
				settled = &s
			}
			if _, err := appr.Exec(id, fmt.Sprintf("stf_%d", staff), fmt.Sprintf("Person %d", staff), verdict, r.IntN(20) == 0,
				when, tool, rule, when.Sub(last).Seconds(), settled); err != nil {
				b.Fatal(err)
			}
			last = when
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("ANALYZE"); err != nil {
		b.Fatal(err)
	}
}
