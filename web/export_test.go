package web_test

import (
	"encoding/csv"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// Every cell of the CSV export is safe to open in a spreadsheet: a customer
// id from a shop's token and a tool name from the model start like
// formulas here.
func TestCSVExportNeutralizesEveryCell(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	run := a.run("=HYPERLINK(\"https://evil.example\")", "Mallory")
	if _, err := a.gate.Call(t.Context(), gate.CallRequest{RunID: run, CustomerID: "=HYPERLINK(\"https://evil.example\")", Channel: "test",
		Tool: "@SUM(1+1)", Args: []byte(`{"x":"+1"}`)}); err != nil {
		t.Fatal(err)
	}
	b := a.signIn("aud@x.test")
	res, body := b.get("/audit/export.csv")
	if res.StatusCode != 200 {
		t.Fatalf("export: %d", res.StatusCode)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%d rows: %v", len(rows), err)
	}
	for _, row := range rows[1:] {
		for i, cell := range row {
			if cell != "" && strings.ContainsAny(cell[:1], "=+-@\t\r") {
				t.Errorf("column %s starts like a formula: %q", rows[0][i], cell)
			}
		}
	}
	if !strings.Contains(body, `'=HYPERLINK`) || !strings.Contains(body, `'@SUM(1+1)`) {
		t.Fatal("the cells should be kept, with a leading quote")
	}
}
