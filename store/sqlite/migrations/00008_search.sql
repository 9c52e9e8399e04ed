-- +goose Up
-- Derived fields of a checkpoint: its token count and when it last changed.
ALTER TABLE checkpoints ADD COLUMN token_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN token_encoding TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE checkpoints SET updated_at = COALESCE(decided_at, created_at);

-- One row per checkpoint: doc_id is the rowid of its full-text row (an
-- INTEGER PRIMARY KEY, which VACUUM keeps, unlike a plain rowid), and its
-- vector once embedded. The checkpoint's session and project are copied
-- (they never change) so that filtering full-text matches by scope reads
-- this small table, not the checkpoints. vector_version orders vector
-- writes, so a reader holding vectors in memory loads only those written
-- since it last looked.
CREATE TABLE checkpoint_search (
    doc_id         INTEGER PRIMARY KEY,
    checkpoint_id  TEXT NOT NULL UNIQUE REFERENCES checkpoints (id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL,
    project_path   TEXT NOT NULL,
    model          TEXT NOT NULL DEFAULT '',
    dims           INTEGER NOT NULL DEFAULT 0,
    vector         BLOB,
    vector_version INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX checkpoint_search_version ON checkpoint_search (vector_version) WHERE vector_version > 0;

-- The text lives in checkpoints: the full-text index keeps no copy.
CREATE VIRTUAL TABLE checkpoint_fts USING fts5 (
    name, summary, description, tags,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
-- A match in the name, summary or tags weighs twice one in the description.
INSERT INTO checkpoint_fts (checkpoint_fts, rank) VALUES ('rank', 'bm25(2.0, 2.0, 1.0, 2.0)');

-- Checkpoints waiting for their vector: drained by the indexer, retried
-- with backoff.
CREATE TABLE embedding_queue (
    checkpoint_id   TEXT PRIMARY KEY REFERENCES checkpoints (id) ON DELETE CASCADE,
    queued_at       INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX embedding_queue_due ON embedding_queue (next_attempt_at, queued_at, checkpoint_id);

-- The index's model, and counters that tell an in-memory copy of the
-- vectors what changed: vector_version grows with every vector written,
-- removed with every vector deleted.
CREATE TABLE search_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    model          TEXT NOT NULL DEFAULT '',
    dims           INTEGER NOT NULL DEFAULT 0,
    vector_version INTEGER NOT NULL DEFAULT 0,
    removed        INTEGER NOT NULL DEFAULT 0
);
INSERT INTO search_state (id) VALUES (1);

-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path) VALUES (new.id, new.session_id, new.project_path);
    INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
        VALUES ((SELECT doc_id FROM checkpoint_search WHERE checkpoint_id = new.id),
                new.name, new.summary, new.description,
                COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(new.tags AS TEXT))), ''));
    INSERT INTO embedding_queue (checkpoint_id, queued_at) VALUES (new.id, new.created_at);
END;
-- +goose StatementEnd

-- Deleting a checkpoint cascades to its search row, and that to the rest.
-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id;
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path)
    SELECT id, session_id, project_path FROM checkpoints ORDER BY created_at, id;
INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
    SELECT s.doc_id, c.name, c.summary, c.description,
           COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(c.tags AS TEXT))), '')
    FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id;
INSERT INTO embedding_queue (checkpoint_id, queued_at) SELECT id, created_at FROM checkpoints;

-- +goose Down
DROP TRIGGER checkpoint_search_delete;
DROP TRIGGER checkpoints_search_insert;
DROP TABLE search_state;
DROP TABLE embedding_queue;
DROP TABLE checkpoint_fts;
DROP TABLE checkpoint_search;
ALTER TABLE checkpoints DROP COLUMN updated_at;
ALTER TABLE checkpoints DROP COLUMN token_encoding;
ALTER TABLE checkpoints DROP COLUMN token_count;
