package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Several audit chains (ARCHITECTURE.md, "Several audit chains"). Each
// instance on PostgreSQL appends to a chain of its own, so the instances'
// transactions never wait for one another's head row; SQLite, one
// instance, has chain 0 alone, and its units never ask a call's chain. A call's events all go to one chain, the
// one of the instance that recorded it (ToolCall.Chain), whichever
// instance acts on the call later: a unit of work that appends an event
// about a call of another chain is run again, after its batch, in a
// transaction that holds that chain's head (writer.run). So a call's
// events are in one line, in the order they happened, and a receipt or an
// evidence bundle needs the links of one chain.

// chainLockClass is the first key of the session advisory locks by which
// instances claim chains (the second is the chain's number). Advisory locks
// with two int4 keys never meet Serialize's, which take one bigint.
const chainLockClass = 0x6175 // "au"

// maxChains bounds the chains instances claim: past it, an instance
// shares the last chain, which the head's row lock keeps one line.
const maxChains = 64

// Chain is the audit chain this store appends to.
func (s *Store) Chain() int64 { return s.chain }

// claimChain takes the lowest chain no live instance holds, with a session
// advisory lock on a connection kept for the store's life: when the
// instance goes, its chain is free for the next one to start, which goes
// on from its head. Chains are never abandoned, so there are never more
// than the most instances that ran at once. Were the connection lost and
// the chain claimed by another instance, both would append to it in turns
// (the head's row lock): slower, never wrong.
func (s *Store) claimChain(ctx context.Context) error {
	conn, err := s.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("claim an audit chain: %w", err)
	}
	for n := int64(0); n < maxChains; n++ {
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, chainLockClass, n).Scan(&ok); err != nil {
			conn.Close()
			return fmt.Errorf("claim an audit chain: %w", err)
		}
		if ok || n == maxChains-1 {
			s.chain, s.chainConn = n, conn
			break
		}
	}
	// The head row exists before the first append, so the first two
	// transactions to append take turns on it like all the others.
	if _, err := conn.ExecContext(ctx, `INSERT INTO audit_heads (chain, seq, hash) VALUES ($1, 0, '') ON CONFLICT (chain) DO NOTHING`, s.chain); err != nil {
		return fmt.Errorf("claim an audit chain: %w", err)
	}
	return nil
}

// callChain is a call's chain as this transaction learned it.
type callChain struct {
	id    string
	chain int64
}

// knowChain notes the chain of a call this transaction recorded or read.
func (tx *Tx) knowChain(id string, chain int64) {
	if !tx.d.pg {
		return // one instance, one chain: nothing to ask
	}
	for i := range tx.calls {
		if tx.calls[i].id == id {
			return
		}
	}
	tx.calls = append(tx.calls, callChain{id: id, chain: chain})
}

// otherChainError is a unit of work that appended an event about a call
// of another chain than the one its transaction holds.
type otherChainError struct{ chain int64 }

func (e *otherChainError) Error() string {
	return fmt.Sprintf("a unit of work appended to two audit chains (%d is the second)", e.chain)
}

// onCallsChain makes sure the transaction holds the chain of call id (one
// that has no record yet goes to the transaction's chain).
func (tx *Tx) onCallsChain(id string) error {
	if !tx.d.pg {
		return nil // one instance, one chain
	}
	chain, known := tx.chain.no, false
	for i := range tx.calls {
		if tx.calls[i].id == id {
			chain, known = tx.calls[i].chain, true
			break
		}
	}
	if !known {
		row, err := tx.queryRow(`SELECT chain FROM tool_calls WHERE id = ?`, id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the call's audit chain: %w", err)
		default:
			chain = intValue(row[0])
		}
		tx.knowChain(id, chain)
	}
	if chain != tx.chain.no {
		return &otherChainError{chain: chain}
	}
	return nil
}
