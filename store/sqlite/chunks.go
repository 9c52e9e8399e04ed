package sqlite

import (
	"context"
	"encoding/json"
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
// chunks, so no query of theirs runs while a result set is open.
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
		return u, fmt.Errorf("sqlite: count state chunks: %w", err)
	}
	return u, nil
}

func (t *tx) SweepStateChunks(ctx context.Context, dryRun bool) (store.ChunkUsage, error) {
	n, size, err := chunkstore.Sweep(ctx, chunkTable{t.q}, dryRun)
	return store.ChunkUsage{Chunks: n, Bytes: size}, err
}
