package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"

	_ "github.com/mattn/go-sqlite3" // the driver Countersign's store uses
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkProxy is the floor of a hop built on the Go SDK, as Countersign's is:
// a streamable HTTP server of the SDK whose one tool forwards each call to
// the upstream over stdio with the SDK's client. With rec nil it records
// nothing; otherwise rec is told before each call is forwarded and after
// it came back, and an error from it fails the call. A 2025 session of it
// is returned connected, or with modern a 2026-07-28 client of it served
// statelessly (the Go SDK client's default).
func sdkProxy(ctx context.Context, script, dir, tool string, rec recorder, modern bool, connect func(url, version string, rt http.RoundTripper) (*mcp.ClientSession, error)) (*mcp.ClientSession, func(), error) {
	up, err := mcp.NewClient(&mcp.Implementation{Name: "sdk-proxy", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", script, dir)}, nil)
	if err != nil {
		return nil, nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-proxy", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if rec == nil {
			return up.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: req.Params.Arguments})
		}
		id, err := rec.asked(ctx, tool, req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		res, err := up.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: req.Params.Arguments})
		if err != nil {
			return nil, err
		}
		return res, rec.answered(ctx, id, res)
	})
	version, opts := "2025-11-25", &mcp.StreamableHTTPOptions{}
	if modern {
		version, opts = "", &mcp.StreamableHTTPOptions{Stateless: true}
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts))
	cs, err := connect(srv.URL, version, http.DefaultTransport)
	if err != nil {
		srv.Close()
		up.Close()
		return nil, nil, err
	}
	return cs, func() { cs.Close(); srv.Close(); up.Close() }, nil
}

// recorder is what a proxy writes about each call it forwards.
type recorder interface {
	asked(ctx context.Context, tool string, args json.RawMessage) (int64, error)
	answered(ctx context.Context, id int64, res *mcp.CallToolResult) error
}

// floorGate is sdkProxy with the least a gate that keeps Countersign's
// promises must do on a call's way (ARCHITECTURE.md, "A call from an outside agent"): the call committed before
// it is forwarded, and its outcome committed before the answer, with a
// signature over it. Two SQLite commits in WAL mode with synchronous
// NORMAL, as Countersign's store has them, on one table with no index
// but its key, and one Ed25519 signature. No policy, no audit chain, no
// agent key, no limits: what is left is below any gate built on the Go
// SDK, so what it adds is a floor for Countersign's hop.
func floorGate(ctx context.Context, script, dir, tool string, connect func(url, version string, rt http.RoundTripper) (*mcp.ClientSession, error)) (*mcp.ClientSession, func(), error) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "floor.db")+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000")
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE calls (id INTEGER PRIMARY KEY, tool TEXT NOT NULL, args TEXT NOT NULL,
		status TEXT NOT NULL, result TEXT, signature BLOB)`); err != nil {
		db.Close()
		return nil, nil, err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	cs, stop, err := sdkProxy(ctx, script, dir, tool, &floorRecorder{db: db, key: key}, false, connect)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return cs, func() { stop(); db.Close() }, nil
}

type floorRecorder struct {
	db   *sql.DB
	key  ed25519.PrivateKey
	next atomic.Int64
}

func (f *floorRecorder) asked(ctx context.Context, tool string, args json.RawMessage) (int64, error) {
	id := f.next.Add(1)
	_, err := f.db.ExecContext(ctx, "INSERT INTO calls (id, tool, args, status) VALUES (?, ?, ?, 'running')", id, tool, string(args))
	return id, err
}

func (f *floorRecorder) answered(ctx context.Context, id int64, res *mcp.CallToolResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	sig := ed25519.Sign(f.key, b)
	r, err := f.db.ExecContext(ctx, "UPDATE calls SET status = 'done', result = ?, signature = ? WHERE id = ?", string(b), sig, id)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return fmt.Errorf("call %d: %d rows recorded", id, n)
	}
	return nil
}
