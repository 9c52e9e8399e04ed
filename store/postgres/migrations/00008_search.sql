-- +goose Up
-- Derived fields of a checkpoint: its token count and when it last changed.
ALTER TABLE checkpoints ADD COLUMN token_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN token_encoding TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN updated_at BIGINT NOT NULL DEFAULT 0;
UPDATE checkpoints SET updated_at = COALESCE(decided_at, created_at);

-- One row per checkpoint, written in the transaction that inserts it:
-- its full-text document and, once embedded, its vector. doc_id grows with
-- every insert, so the newest matches are the highest. The checkpoint's
-- session and project are copied (they never change) so that filtering
-- matches by scope reads this table, not the wide checkpoint rows.
--
-- doc is a tsvector the store builds itself (the words of the name,
-- summary and tags weighted A, of the description B), so that a query's
-- words are split exactly as the document's are, whatever the server's
-- text search parser and locale would make of them. Rows of checkpoints
-- saved before this migration start with doc NULL; the store fills them in
-- when it opens the database.
CREATE TABLE checkpoint_search (
    doc_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    checkpoint_id TEXT NOT NULL UNIQUE REFERENCES checkpoints (id) ON DELETE CASCADE,
    session_id    TEXT NOT NULL,
    project_path  TEXT COLLATE "C" NOT NULL,
    doc           TSVECTOR,
    model         TEXT NOT NULL DEFAULT '',
    dims          BIGINT NOT NULL DEFAULT 0,
    vector        BYTEA
);
CREATE INDEX checkpoint_search_doc ON checkpoint_search USING GIN (doc);
CREATE INDEX checkpoint_search_vectors ON checkpoint_search (model, dims) WHERE vector IS NOT NULL;
CREATE INDEX checkpoint_search_unbuilt ON checkpoint_search (doc_id) WHERE doc IS NULL;

-- Checkpoints waiting for their vector: drained by the indexer, retried
-- with backoff.
CREATE TABLE embedding_queue (
    checkpoint_id   TEXT PRIMARY KEY REFERENCES checkpoints (id) ON DELETE CASCADE,
    queued_at       BIGINT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX embedding_queue_due ON embedding_queue (next_attempt_at, queued_at, checkpoint_id);

-- The index's model: vectors of another are kept but not counted, and
-- late ones are dropped.
CREATE TABLE search_state (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL DEFAULT '',
    dims  BIGINT NOT NULL DEFAULT 0
);
INSERT INTO search_state (id) VALUES (1);

INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path)
    SELECT id, session_id, project_path FROM checkpoints ORDER BY created_at, id;
INSERT INTO embedding_queue (checkpoint_id, queued_at) SELECT id, created_at FROM checkpoints;

-- +goose Down
DROP TABLE search_state;
DROP TABLE embedding_queue;
DROP TABLE checkpoint_search;
ALTER TABLE checkpoints DROP COLUMN updated_at;
ALTER TABLE checkpoints DROP COLUMN token_encoding;
ALTER TABLE checkpoints DROP COLUMN token_count;
