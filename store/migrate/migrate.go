// Package migrate copies a belay database from the embedded SQLite store into
// an empty PostgreSQL one: the path a team takes when it outgrows one
// machine.
//
// It copies the tables themselves, column by column, not records through
// the store interface: the two drivers keep the same schema (the same
// migrations, the same column names and encodings), so a row copy keeps
// every byte of a checkpoint (its checksum still verifies), every event's
// sequence number, token hashes and webhook positions, without a new
// interface on store.Store that every driver would have to carry. The
// copy runs in one PostgreSQL transaction: a failure leaves the destination
// as empty as it was.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/sqlite"
)

// CodeNotEmpty is the code of the error refusing a destination that holds data.
const CodeNotEmpty = belay.CodeConflict

// table is one table to copy, in an order that satisfies foreign keys.
type table struct {
	name string
	// order is the source's ORDER BY, so generated keys keep their order.
	order string
	// from is the source's table or view to read, when not name.
	from string
	// skip are destination columns the copy leaves to the database.
	skip []string
	// seeded tables hold one row from the migrations; it is replaced.
	seeded bool
}

// source is the source's table or view of t.
func (t table) source() string {
	if t.from != "" {
		return t.from
	}
	return t.name
}

var tables = []table{
	// The chunks of large agent states, which sessions and checkpoints
	// refer to by the roots their state columns hold: copied as they are.
	{name: "state_chunks", order: "hash"},
	{name: "sessions", order: "created_at, id"},
	{name: "checkpoints", order: "created_at, id"},
	{name: "checkpoint_tags", order: "checkpoint_id, tag"},
	// doc_id is generated (in the source's order); doc, the text search
	// document, is built by the PostgreSQL store when it opens the database.
	// SQLite writes a search row only with a vector (its migration 00017);
	// the view has one for every checkpoint, as PostgreSQL does.
	{name: "checkpoint_search", order: "doc_id", skip: []string{"doc_id", "doc"}, from: "checkpoint_search_all"},
	// SQLite queues a new checkpoint for its vector without a row (see its
	// migration 00013); the view lists every checkpoint waiting.
	{name: "embedding_queue", order: "checkpoint_id", from: "embedding_jobs"},
	{name: "search_state", order: "id", seeded: true},
	{name: "events", order: "seq"},
	{name: "rollbacks", order: "created_at, id"},
	{name: "session_grants", order: "created_at, session_id, user_name"},
	{name: "users", order: "name"},
	{name: "tokens", order: "created_at, hash"},
	{name: "webhooks", order: "created_at, id"},
	{name: "webhook_deliveries", order: "created_at, id"},
	{name: "retention", order: "project_path"},
	{name: "settings", order: "name"},
	{name: "signouts", order: "id"},
}

// Count is one table's rows in the source and in the destination after the copy.
type Count struct {
	Table       string `json:"table"`
	Source      int64  `json:"source"`
	Destination int64  `json:"destination"`
}

// Result is what a copy did.
type Result struct {
	Tables []Count `json:"tables"`
	// LastEventSeq is the newest event's sequence number; the destination
	// hands out the next one after it.
	LastEventSeq int64 `json:"last_event_seq"`
	// NextEventSeq is what the destination's event counter will hand out next.
	NextEventSeq int64 `json:"next_event_seq"`
	// OK is true when every table has as many rows in both and the event
	// counter continues after the last event.
	OK bool `json:"ok"`
}

// Progress is told, from the copying goroutine, how many rows of a table of
// total were copied.
type Progress func(table string, done, total int64)

// batch is how many rows one COPY round sends.
const batch = 2000

// SQLiteToPostgres copies the belay database in the SQLite file at src into
// the PostgreSQL database at dst, which must hold no belay data. Both are
// first brought to the newest schema this belay knows.
func SQLiteToPostgres(ctx context.Context, src, dst string, progress Progress) (*Result, error) {
	if progress == nil {
		progress = func(string, int64, int64) {}
	}
	if _, err := os.Stat(src); err != nil {
		return nil, belay.Errorf(belay.CodeNotFound, "no belay database at %s: %v", src, err).With("path", src)
	}
	// Opening through the drivers migrates both schemas to the same version.
	s, err := sqlite.Open(ctx, src)
	if err != nil {
		return nil, err
	}
	s.Close()
	p, err := postgres.Open(ctx, dst)
	if err != nil {
		return nil, err
	}
	p.Close()

	sdb, err := sql.Open("sqlite", src+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("migrate: open %s: %w", src, err)
	}
	defer sdb.Close()
	// One read transaction: a consistent snapshot even if belay writes meanwhile.
	stx, err := sdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", src, err)
	}
	defer stx.Rollback()

	pc, err := pgx.Connect(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer pc.Close(context.WithoutCancel(ctx))
	ptx, err := pc.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: begin: %w", err)
	}
	defer ptx.Rollback(context.WithoutCancel(ctx))
	// Nobody else writes belay data while the copy runs.
	if _, err := ptx.Exec(ctx, `LOCK TABLE event_counter IN EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	if err := checkVersions(ctx, stx, ptx); err != nil {
		return nil, err
	}
	if err := checkEmpty(ctx, ptx, dst); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, t := range tables {
		n, err := copyTable(ctx, stx, ptx, t, progress)
		if err != nil {
			return nil, err
		}
		res.Tables = append(res.Tables, Count{Table: t.name, Source: n})
	}
	if _, err := ptx.Exec(ctx, `UPDATE event_counter SET seq = (SELECT COALESCE(MAX(seq), 0) FROM events)`); err != nil {
		return nil, fmt.Errorf("migrate: set the event counter: %w", err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate: commit: %w", err)
	}

	// Verify on what was committed.
	res.OK = true
	for i, c := range res.Tables {
		if err := pc.QueryRow(ctx, `SELECT COUNT(*) FROM `+c.Table).Scan(&res.Tables[i].Destination); err != nil {
			return nil, fmt.Errorf("migrate: count %s: %w", c.Table, err)
		}
		if res.Tables[i].Destination != c.Source {
			res.OK = false
		}
	}
	if err := stx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&res.LastEventSeq); err != nil {
		return nil, fmt.Errorf("migrate: last event: %w", err)
	}
	if err := pc.QueryRow(ctx, `SELECT seq + 1 FROM event_counter`).Scan(&res.NextEventSeq); err != nil {
		return nil, fmt.Errorf("migrate: event counter: %w", err)
	}
	if res.NextEventSeq != res.LastEventSeq+1 {
		res.OK = false
	}
	// Opening the store builds the text search documents of the copied rows.
	if p, err = postgres.Open(ctx, dst); err != nil {
		return res, err
	}
	p.Close()
	return res, nil
}

// checkVersions refuses schemas of different versions.
func checkVersions(ctx context.Context, stx *sql.Tx, ptx pgx.Tx) error {
	var sv, pv int64
	if err := stx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version`).Scan(&sv); err != nil {
		return fmt.Errorf("migrate: source schema version: %w", err)
	}
	if err := ptx.QueryRow(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version`).Scan(&pv); err != nil {
		return fmt.Errorf("migrate: destination schema version: %w", err)
	}
	if sv != pv {
		return belay.Errorf(belay.CodeConflict, "the source's schema is version %d, the destination's %d: use one belay version for both", sv, pv)
	}
	return nil
}

// checkEmpty refuses a destination holding any belay data.
func checkEmpty(ctx context.Context, ptx pgx.Tx, dst string) error {
	var full []string
	for _, t := range tables {
		if t.seeded {
			continue
		}
		var has bool
		if err := ptx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+t.name+`)`).Scan(&has); err != nil {
			return fmt.Errorf("migrate: look at %s: %w", t.name, err)
		}
		if has {
			full = append(full, t.name)
		}
	}
	var last int64
	if err := ptx.QueryRow(ctx, `SELECT seq FROM event_counter`).Scan(&last); err != nil {
		return fmt.Errorf("migrate: event counter: %w", err)
	}
	if last > 0 && !slices.Contains(full, "events") {
		full = append(full, "event_counter")
	}
	if len(full) > 0 {
		return belay.Errorf(CodeNotEmpty, "the destination database already holds belay data (in %s): migrate copies into an empty database only",
			strings.Join(full, ", ")).With("tables", full).With("database", redact(dst))
	}
	return nil
}

// column is a destination column and its PostgreSQL type.
type column struct{ name, typ string }

// copyTable copies every row of t, the columns both databases have.
func copyTable(ctx context.Context, stx *sql.Tx, ptx pgx.Tx, t table, progress Progress) (int64, error) {
	cols, err := commonColumns(ctx, stx, ptx, t)
	if err != nil {
		return 0, err
	}
	var total int64
	if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t.source()).Scan(&total); err != nil {
		return 0, fmt.Errorf("migrate: count %s: %w", t.name, err)
	}
	progress(t.name, 0, total)
	if t.seeded {
		if _, err := ptx.Exec(ctx, `DELETE FROM `+t.name); err != nil {
			return 0, fmt.Errorf("migrate: clear %s: %w", t.name, err)
		}
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	rows, err := stx.QueryContext(ctx, `SELECT `+strings.Join(names, ", ")+` FROM `+t.source()+` ORDER BY `+t.order)
	if err != nil {
		return 0, fmt.Errorf("migrate: read %s: %w", t.name, err)
	}
	defer rows.Close()
	var done int64
	buf := make([][]any, 0, batch)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		n, err := ptx.CopyFrom(ctx, pgx.Identifier{t.name}, names, pgx.CopyFromRows(buf))
		if err != nil {
			return fmt.Errorf("migrate: write %s: %w", t.name, err)
		}
		if n != int64(len(buf)) {
			return fmt.Errorf("migrate: write %s: %d of %d rows written", t.name, n, len(buf))
		}
		done += n
		buf = buf[:0]
		progress(t.name, done, total)
		return nil
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return 0, fmt.Errorf("migrate: read %s: %w", t.name, err)
		}
		for i, c := range cols {
			if vals[i], err = convert(vals[i], c.typ); err != nil {
				return 0, fmt.Errorf("migrate: %s.%s: %w", t.name, c.name, err)
			}
		}
		buf = append(buf, vals)
		if len(buf) == batch {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("migrate: read %s: %w", t.name, err)
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// commonColumns returns the destination's columns of t that the source has
// too; a destination column the source lacks must have a default.
func commonColumns(ctx context.Context, stx *sql.Tx, ptx pgx.Tx, t table) ([]column, error) {
	srows, err := stx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, t.source())
	if err != nil {
		return nil, fmt.Errorf("migrate: columns of %s: %w", t.name, err)
	}
	have := map[string]bool{}
	for srows.Next() {
		var n string
		if err := srows.Scan(&n); err != nil {
			srows.Close()
			return nil, err
		}
		have[n] = true
	}
	srows.Close()
	if len(have) == 0 {
		return nil, fmt.Errorf("migrate: the source has no table %s", t.name)
	}
	prows, err := ptx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, t.name)
	if err != nil {
		return nil, fmt.Errorf("migrate: columns of %s: %w", t.name, err)
	}
	defer prows.Close()
	var cols []column
	for prows.Next() {
		var c column
		if err := prows.Scan(&c.name, &c.typ); err != nil {
			return nil, err
		}
		if have[c.name] && !slices.Contains(t.skip, c.name) {
			cols = append(cols, c)
		}
	}
	if err := prows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("migrate: the destination has no table %s", t.name)
	}
	return cols, nil
}

// convert turns a SQLite value into what the PostgreSQL column takes, byte
// for byte for text and blobs.
func convert(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return slices.Clone(x), nil
		case string:
			return []byte(x), nil
		}
	case "text":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "bigint", "integer":
		switch x := v.(type) {
		case int64:
			if typ == "integer" {
				return int32(x), nil
			}
			return x, nil
		case float64:
			return int64(x), nil
		}
	case "real", "double precision":
		switch x := v.(type) {
		case float64:
			if typ == "real" {
				return float32(x), nil
			}
			return x, nil
		case int64:
			if typ == "real" {
				return float32(x), nil
			}
			return float64(x), nil
		}
	}
	return nil, fmt.Errorf("a %T cannot go into a %s column", v, typ)
}

// redact drops a URL's password for messages.
func redact(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return "the destination"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
