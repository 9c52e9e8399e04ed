-- +goose Up
-- Event sequence numbers are the rowid: events are never deleted, so
-- max(rowid)+1 is gap-free without AUTOINCREMENT, which costs a write of
-- sqlite_sequence on every event. Streams filter by session while scanning
-- forward from a sequence number, so the per-session index only cost writes.
CREATE TABLE events_new (
    seq           INTEGER PRIMARY KEY,
    type          TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL DEFAULT '',
    data          BLOB,
    created_at    INTEGER NOT NULL
);
INSERT INTO events_new SELECT seq, type, session_id, checkpoint_id, data, created_at FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;

-- +goose Down
CREATE TABLE events_old (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    type          TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL DEFAULT '',
    data          BLOB,
    created_at    INTEGER NOT NULL
);
INSERT INTO events_old SELECT * FROM events;
DROP TABLE events;
ALTER TABLE events_old RENAME TO events;
CREATE INDEX events_session ON events (session_id, seq);
