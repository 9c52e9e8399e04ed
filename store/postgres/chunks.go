package postgres

import (
	"context"
	"encoding/json"
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

// saveState returns what the state column holds for state: the state, or
// the root of its chunks, stored first (see store/chunkstore).
func (t *tx) saveState(ctx context.Context, state json.RawMessage) (any, error) {
	if state == nil {
		return nil, nil
	}
	b, err := chunkstore.Save(ctx, chunkTable{t.q}, state)
	return b, err
}

// loadState replaces a root read from a state column by the state.
func (r reader) loadState(ctx context.Context, state *json.RawMessage) error {
	if !chunkstore.IsRoot(*state) {
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

// loadCheckpoints closes rows and loads the states of cps stored as roots.
func (r reader) loadCheckpoints(ctx context.Context, rows resultSet, cps []*belay.Checkpoint) error {
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	for _, c := range cps {
		if err := r.loadState(ctx, &c.AgentState); err != nil {
			return err
		}
	}
	return nil
}

// loadSessions closes rows and loads the states of ss stored as roots.
func (r reader) loadSessions(ctx context.Context, rows resultSet, ss []*belay.Session) error {
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	for _, s := range ss {
		if err := r.loadState(ctx, &s.State); err != nil {
			return err
		}
	}
	return nil
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
