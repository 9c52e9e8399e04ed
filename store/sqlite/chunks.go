package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/chunkstore"
)

// chunkTable is the state_chunks table as a reader or a transaction sees
// it: the chunkstore.Sweeper of this driver. SQLite's one writer keeps a
// sweep and a save from interleaving.
type chunkTable struct{ q querier }

// idsPerQuery is how many ids one lookup binds. A shorter last batch
// repeats its last id, so every lookup is the same prepared statement.
const idsPerQuery = 100

var chunkLookup = `IN (?` + strings.Repeat(",?", idsPerQuery-1) + `)`

// batches calls fn with ids in groups of idsPerQuery, as bind arguments.
func batches(ids []chunkstore.ID, fn func(args []any) error) error {
	for len(ids) > 0 {
		n := min(len(ids), idsPerQuery)
		args := make([]any, idsPerQuery)
		for i := range args {
			id := ids[min(i, n-1)]
			args[i] = id[:]
		}
		if err := fn(args); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (c chunkTable) Get(ctx context.Context, ids []chunkstore.ID) (map[chunkstore.ID][]byte, error) {
	out := make(map[chunkstore.ID][]byte, len(ids))
	err := batches(ids, func(args []any) error {
		rows, err := c.q.QueryContext(ctx, `SELECT hash, data FROM state_chunks WHERE hash `+chunkLookup, args...)
		if err != nil {
			return fmt.Errorf("sqlite: read state chunks: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var hash, data []byte
			if err := rows.Scan(&hash, &data); err != nil {
				return fmt.Errorf("sqlite: read state chunk: %w", err)
			}
			out[chunkstore.ID(hash)] = data
		}
		return rows.Err()
	})
	return out, err
}

func (c chunkTable) Missing(ctx context.Context, ids []chunkstore.ID) ([]chunkstore.ID, error) {
	have := make(map[chunkstore.ID]bool, len(ids))
	err := batches(ids, func(args []any) error {
		rows, err := c.q.QueryContext(ctx, `SELECT hash FROM state_chunks WHERE hash `+chunkLookup, args...)
		if err != nil {
			return fmt.Errorf("sqlite: look up state chunks: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var hash []byte
			if err := rows.Scan(&hash); err != nil {
				return fmt.Errorf("sqlite: look up state chunk: %w", err)
			}
			have[chunkstore.ID(hash)] = true
		}
		return rows.Err()
	})
	var missing []chunkstore.ID
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	return missing, err
}

func (c chunkTable) Put(ctx context.Context, chunks []chunkstore.Chunk) error {
	for _, ch := range chunks {
		_, err := c.q.ExecContext(ctx, `INSERT OR IGNORE INTO state_chunks (hash, size, data) VALUES (?, ?, ?)`,
			ch.ID[:], len(ch.Data), ch.Data)
		if err != nil {
			return fmt.Errorf("sqlite: store state chunk: %w", err)
		}
	}
	return nil
}

func (c chunkTable) Roots(ctx context.Context) ([][]byte, error) {
	// A root begins with a zero byte; JSON never does.
	rows, err := c.q.QueryContext(ctx, `SELECT agent_state FROM checkpoints WHERE substr(agent_state, 1, 1) = x'00'
		UNION ALL SELECT state FROM sessions WHERE substr(state, 1, 1) = x'00'`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read state roots: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var root []byte
		if err := rows.Scan(&root); err != nil {
			return nil, fmt.Errorf("sqlite: read state root: %w", err)
		}
		out = append(out, root)
	}
	return out, rows.Err()
}

func (c chunkTable) Sizes(ctx context.Context) (map[chunkstore.ID]int64, error) {
	rows, err := c.q.QueryContext(ctx, `SELECT hash, size FROM state_chunks`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list state chunks: %w", err)
	}
	defer rows.Close()
	out := map[chunkstore.ID]int64{}
	for rows.Next() {
		var hash []byte
		var size int64
		if err := rows.Scan(&hash, &size); err != nil {
			return nil, fmt.Errorf("sqlite: list state chunk: %w", err)
		}
		if len(hash) != len(chunkstore.ID{}) {
			return nil, belay.Errorf(belay.CodeCheckpointCorrupt, "a state chunk has a key of %d bytes", len(hash))
		}
		out[chunkstore.ID(hash)] = size
	}
	return out, rows.Err()
}

func (c chunkTable) Delete(ctx context.Context, ids []chunkstore.ID) error {
	for _, id := range ids {
		if _, err := c.q.ExecContext(ctx, `DELETE FROM state_chunks WHERE hash = ?`, id[:]); err != nil {
			return fmt.Errorf("sqlite: delete state chunk: %w", err)
		}
	}
	return nil
}

// preparedKey carries in a context a state PrepareState prepared.
type preparedKey struct{}

// PrepareState compresses an agent state kept in its row, or cuts a large
// one into chunks and compresses those the database lacks, before the write
// transaction and beside other writers: in a save of a state of megabytes
// that is most of the work, which the transaction, holding up every other
// write, then does not do again (see store.StatePreparer).
func (db *DB) PrepareState(ctx context.Context, state []byte) context.Context {
	p, err := chunkstore.Prepare(ctx, chunkTable{db.reader.q}, state)
	if err != nil || p == nil {
		return ctx
	}
	return context.WithValue(ctx, preparedKey{}, p)
}

// saveState returns what the state column holds for state: the state, the
// state compressed, or the root of its chunks, stored first (see
// store/chunkstore), prepared already when ctx carries it.
func (t *tx) saveState(ctx context.Context, state json.RawMessage) (any, error) {
	if state == nil {
		return nil, nil
	}
	var b []byte
	var err error
	if p, _ := ctx.Value(preparedKey{}).(*chunkstore.Prepared); p.For(state) {
		b, err = p.Save(ctx, chunkTable{t.q})
	} else {
		b, err = chunkstore.Save(ctx, chunkTable{t.q}, state)
	}
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
// chunks, so no query of theirs runs while a result set is open.
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
		return false, fmt.Errorf("sqlite: look up %s: %w", id, err)
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
		return u, fmt.Errorf("sqlite: count state chunks: %w", err)
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
	rows, err := r.q.QueryContext(ctx, `SELECT length(agent_state),
		CASE substr(agent_state, 1, 1) WHEN x'00' THEN agent_state WHEN x'01' THEN substr(agent_state, 1, ?) END,
		COALESCE(length(outputs), 0) + COALESCE(length(metadata), 0) FROM checkpoints WHERE session_id = ?`, chunkstore.LengthPrefix, sessionID)
	if err != nil {
		return store.CheckpointUsage{}, fmt.Errorf("sqlite: checkpoint usage: %w", err)
	}
	defer rows.Close()
	var u store.CheckpointUsage
	for rows.Next() {
		var state sql.NullInt64
		var head []byte
		var other int64
		if err := rows.Scan(&state, &head, &other); err != nil {
			return store.CheckpointUsage{}, fmt.Errorf("sqlite: checkpoint usage: %w", err)
		}
		if head != nil {
			state.Int64 = int64(chunkstore.Length(head))
		}
		u.Checkpoints++
		u.StateBytes += state.Int64 + other
	}
	return u, rows.Err()
}
