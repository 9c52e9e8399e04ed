package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

// chunkTable is the state_chunks table as a reader or a transaction sees
// it: the chunkstore.Sweeper of this driver. Table locks keep a sweep and a
// save from interleaving: a save takes ROW EXCLUSIVE (Missing), a sweep
// SHARE ROW EXCLUSIVE (Roots), which conflict with each other and not
// with readers or with other saves.
type chunkTable struct{ q querier }

func idArgs(ids []chunkstore.ID) [][]byte {
	out := make([][]byte, len(ids))
	for i := range ids {
		out[i] = ids[i][:]
	}
	return out
}

func (c chunkTable) Get(ctx context.Context, ids []chunkstore.ID) (map[chunkstore.ID][]byte, error) {
	rows, err := c.q.QueryContext(ctx, `SELECT hash, data FROM state_chunks WHERE hash = ANY(?)`, idArgs(ids))
	if err != nil {
		return nil, fmt.Errorf("postgres: read state chunks: %w", err)
	}
	defer rows.Close()
	out := make(map[chunkstore.ID][]byte, len(ids))
	for rows.Next() {
		var hash, data []byte
		if err := rows.Scan(&hash, &data); err != nil {
			return nil, fmt.Errorf("postgres: read state chunk: %w", err)
		}
		out[chunkstore.ID(hash)] = data
	}
	return out, rows.Err()
}

func (c chunkTable) Missing(ctx context.Context, ids []chunkstore.ID) ([]chunkstore.ID, error) {
	// A save looks up its chunks first: from here to its commit, no sweep
	// may delete one it found.
	if _, err := c.q.ExecContext(ctx, `LOCK TABLE state_chunks IN ROW EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("postgres: lock state chunks: %w", err)
	}
	rows, err := c.q.QueryContext(ctx, `SELECT hash FROM state_chunks WHERE hash = ANY(?)`, idArgs(ids))
	if err != nil {
		return nil, fmt.Errorf("postgres: look up state chunks: %w", err)
	}
	defer rows.Close()
	have := make(map[chunkstore.ID]bool, len(ids))
	for rows.Next() {
		var hash []byte
		if err := rows.Scan(&hash); err != nil {
			return nil, fmt.Errorf("postgres: look up state chunk: %w", err)
		}
		have[chunkstore.ID(hash)] = true
	}
	var missing []chunkstore.ID
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	return missing, rows.Err()
}

func (c chunkTable) Put(ctx context.Context, chunks []chunkstore.Chunk) error {
	hashes, sizes, data := make([][]byte, len(chunks)), make([]int64, len(chunks)), make([][]byte, len(chunks))
	for i, ch := range chunks {
		hashes[i], sizes[i], data[i] = ch.ID[:], int64(len(ch.Data)), ch.Data
	}
	// One statement for them all; another save may store the same chunk
	// at the same time.
	_, err := c.q.ExecContext(ctx, `INSERT INTO state_chunks (hash, size, data)
		SELECT * FROM unnest(?::bytea[], ?::bigint[], ?::bytea[]) ON CONFLICT (hash) DO NOTHING`, hashes, sizes, data)
	if err != nil {
		return fmt.Errorf("postgres: store state chunks: %w", err)
	}
	return nil
}

func (c chunkTable) Roots(ctx context.Context) ([][]byte, error) {
	// Saves that looked up chunks commit first; later ones wait for the
	// sweep's commit.
	if _, err := c.q.ExecContext(ctx, `LOCK TABLE state_chunks IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("postgres: lock state chunks: %w", err)
	}
	// A root begins with a zero byte; JSON never does.
	rows, err := c.q.QueryContext(ctx, `SELECT agent_state FROM checkpoints WHERE substring(agent_state from 1 for 1) = '\x00'::bytea
		UNION ALL SELECT state FROM sessions WHERE substring(state from 1 for 1) = '\x00'::bytea`)
	if err != nil {
		return nil, fmt.Errorf("postgres: read state roots: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var root []byte
		if err := rows.Scan(&root); err != nil {
			return nil, fmt.Errorf("postgres: read state root: %w", err)
		}
		out = append(out, root)
	}
	return out, rows.Err()
}

func (c chunkTable) Sizes(ctx context.Context) (map[chunkstore.ID]int64, error) {
	rows, err := c.q.QueryContext(ctx, `SELECT hash, size FROM state_chunks`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list state chunks: %w", err)
	}
	defer rows.Close()
	out := map[chunkstore.ID]int64{}
	for rows.Next() {
		var hash []byte
		var size int64
		if err := rows.Scan(&hash, &size); err != nil {
			return nil, fmt.Errorf("postgres: list state chunk: %w", err)
		}
		if len(hash) != len(chunkstore.ID{}) {
			return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "a state chunk has a key of %d bytes", len(hash))
		}
		out[chunkstore.ID(hash)] = size
	}
	return out, rows.Err()
}

func (c chunkTable) Delete(ctx context.Context, ids []chunkstore.ID) error {
	if _, err := c.q.ExecContext(ctx, `DELETE FROM state_chunks WHERE hash = ANY(?)`, idArgs(ids)); err != nil {
		return fmt.Errorf("postgres: delete state chunks: %w", err)
	}
	return nil
}

// saveState returns what the state column holds for state: the state, the
// state compressed, or the root of its chunks, stored first (see
// store/chunkstore).
func (t *tx) saveState(ctx context.Context, state json.RawMessage) (any, error) {
	if state == nil {
		return nil, nil
	}
	b, err := chunkstore.Save(ctx, chunkTable{t.q}, state)
	if err == nil && len(state) >= chunkstore.CompressMin {
		t.kept.state, t.kept.stored = state, b
	}
	return b, err
}

// loadState replaces a root or a compressed state read from a state column
// by the state.
func (r reader) loadState(ctx context.Context, state *json.RawMessage) error {
	if chunkstore.Plain(*state) {
		return nil
	}
	b, err := chunkstore.Load(ctx, chunkTable{r.q}, *state)
	if err != nil {
		return err
	}
	*state = b
	return nil
}

// resultSet is what loadCheckpoints and loadSessions close before they read
// chunks: a connection runs one query at a time.
type resultSet interface {
	Err() error
	Close() error
}

// loadCheckpointState loads c's state. A state its chunks cannot rebuild is
// CHECKPOINT_CORRUPTED, unless the checkpoint was deleted (and its chunks
// swept) since its row was read: then it is CHECKPOINT_NOT_FOUND.
func (r reader) loadCheckpointState(ctx context.Context, c *belay.Checkpoint) error {
	err := r.loadState(ctx, &c.AgentState)
	damaged, ok := chunkstore.Unreadable(err, fmt.Sprintf("checkpoint #%d (%s)", c.Seq, c.ID))
	if !ok {
		return err
	}
	if gone, err := r.gone(ctx, `SELECT 1 FROM checkpoints WHERE id = ?`, c.ID); err != nil || gone {
		return cmp.Or(err, checkpointNotFound(c.ID))
	}
	return damaged.With("id", c.ID).With("seq", c.Seq).With("sessionId", c.SessionID)
}

// loadSessionState is loadCheckpointState for a session's state.
func (r reader) loadSessionState(ctx context.Context, s *belay.Session) error {
	err := r.loadState(ctx, &s.State)
	damaged, ok := chunkstore.Unreadable(err, "session "+s.ID)
	if !ok {
		return err
	}
	if gone, err := r.gone(ctx, `SELECT 1 FROM sessions WHERE id = ?`, s.ID); err != nil || gone {
		return cmp.Or(err, sessionNotFound(s.ID))
	}
	return damaged.With("sessionId", s.ID)
}

// gone reports whether the row query selects is no longer there.
func (r reader) gone(ctx context.Context, query, id string) (bool, error) {
	var one int
	switch err := r.q.QueryRowContext(ctx, query, id).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("postgres: look up %s: %w", id, err)
	}
	return false, nil
}

// loadCheckpoints closes rows, loads the states of cps stored as roots and
// returns cps but those deleted meanwhile. A state that cannot be rebuilt
// fails only its checkpoint: its AgentState is nil and its StateErr says
// why.
func (r reader) loadCheckpoints(ctx context.Context, rows resultSet, cps []*belay.Checkpoint) ([]*belay.Checkpoint, error) {
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	out := cps[:0]
	for _, c := range cps {
		err := r.loadCheckpointState(ctx, c)
		var e *belay.Error
		switch {
		case belay.IsCode(err, belay.CodeCheckpointNotFound):
			continue
		case errors.As(err, &e) && e.Code == belay.CodeCheckpointCorrupt:
			c.AgentState, c.StateErr = nil, e
		case err != nil:
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// loadSessions is loadCheckpoints for sessions.
func (r reader) loadSessions(ctx context.Context, rows resultSet, ss []*belay.Session) ([]*belay.Session, error) {
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	out := ss[:0]
	for _, s := range ss {
		err := r.loadSessionState(ctx, s)
		var e *belay.Error
		switch {
		case belay.IsCode(err, belay.CodeSessionNotFound):
			continue
		case errors.As(err, &e) && e.Code == belay.CodeCheckpointCorrupt:
			s.State, s.StateErr = nil, e
		case err != nil:
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r reader) StateChunks(ctx context.Context) (store.ChunkUsage, error) {
	var u store.ChunkUsage
	err := r.q.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM state_chunks`).Scan(&u.Chunks, &u.Bytes)
	if err != nil {
		return u, fmt.Errorf("postgres: count state chunks: %w", err)
	}
	return u, nil
}

func (t *tx) SweepStateChunks(ctx context.Context, dryRun bool) (store.ChunkUsage, error) {
	n, size, err := chunkstore.Sweep(ctx, chunkTable{t.q}, dryRun)
	return store.ChunkUsage{Chunks: n, Bytes: size}, err
}

func (r reader) CheckpointUsage(ctx context.Context, sessionID string) (store.CheckpointUsage, error) {
	// A root, or a compressed state's first bytes, is read for the length it
	// declares; any other state is counted by the database.
	rows, err := r.q.QueryContext(ctx, `SELECT octet_length(agent_state),
		CASE substring(agent_state from 1 for 1) WHEN '\x00'::bytea THEN agent_state WHEN '\x01'::bytea THEN substring(agent_state from 1 for ?) END,
		COALESCE(octet_length(outputs), 0) + COALESCE(octet_length(metadata), 0) FROM checkpoints WHERE session_id = ?`, chunkstore.LengthPrefix, sessionID)
	if err != nil {
		return store.CheckpointUsage{}, fmt.Errorf("postgres: checkpoint usage: %w", err)
	}
	defer rows.Close()
	var u store.CheckpointUsage
	for rows.Next() {
		var state sql.NullInt64
		var head []byte
		var other int64
		if err := rows.Scan(&state, &head, &other); err != nil {
			return store.CheckpointUsage{}, fmt.Errorf("postgres: checkpoint usage: %w", err)
		}
		if head != nil {
			state.Int64 = int64(chunkstore.Length(head))
		}
		u.Checkpoints++
		u.StateBytes += state.Int64 + other
	}
	return u, rows.Err()
}
