-- +goose Up
-- A checkpoint names its search row by doc_id, which InsertCheckpoint
-- computes (as the insert trigger did: above the highest row and both
-- marks), so checkpoint_search needs no unique index on checkpoint_id, a
-- page written on every save: its one lookup by checkpoint (PutEmbedding)
-- goes through the checkpoint's row, and a trigger replaces the foreign
-- key's cascade from a deleted checkpoint.
ALTER TABLE checkpoints ADD COLUMN doc_id INTEGER;
UPDATE checkpoints SET doc_id = (SELECT doc_id FROM checkpoint_search s WHERE s.checkpoint_id = checkpoints.id);

DROP VIEW embedding_jobs;
DROP TRIGGER checkpoints_search_insert;
DROP TRIGGER checkpoint_search_delete;
CREATE TABLE checkpoint_search_new (
    doc_id         INTEGER PRIMARY KEY,
    checkpoint_id  TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    project_path   TEXT NOT NULL,
    model          TEXT NOT NULL DEFAULT '',
    dims           INTEGER NOT NULL DEFAULT 0,
    vector         BLOB,
    vector_version INTEGER NOT NULL DEFAULT 0
);
INSERT INTO checkpoint_search_new (doc_id, checkpoint_id, session_id, project_path, model, dims, vector, vector_version)
    SELECT doc_id, checkpoint_id, session_id, project_path, model, dims, vector, vector_version FROM checkpoint_search;
DROP TABLE checkpoint_search;
ALTER TABLE checkpoint_search_new RENAME TO checkpoint_search;
CREATE INDEX checkpoint_search_version ON checkpoint_search (vector_version) WHERE vector_version > 0;

-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (doc_id, checkpoint_id, session_id, project_path)
        VALUES (new.doc_id, new.id, new.session_id, new.project_path);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_search WHERE doc_id = old.doc_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND old.doc_id <= (SELECT indexed_through FROM search_state WHERE id = 1);
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

CREATE VIEW embedding_jobs AS
    SELECT checkpoint_id, queued_at, attempts, next_attempt_at, last_error FROM embedding_queue
    UNION ALL
    SELECT s.checkpoint_id, c.created_at, 0, 0, '' FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id
    WHERE s.doc_id > (SELECT queued_through FROM search_state WHERE id = 1);

-- +goose Down
DROP VIEW embedding_jobs;
DROP TRIGGER checkpoint_search_delete;
DROP TRIGGER checkpoints_search_delete;
DROP TRIGGER checkpoints_search_insert;
ALTER TABLE checkpoints DROP COLUMN doc_id;
CREATE TABLE checkpoint_search_old (
    doc_id         INTEGER PRIMARY KEY,
    checkpoint_id  TEXT NOT NULL UNIQUE REFERENCES checkpoints (id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL,
    project_path   TEXT NOT NULL,
    model          TEXT NOT NULL DEFAULT '',
    dims           INTEGER NOT NULL DEFAULT 0,
    vector         BLOB,
    vector_version INTEGER NOT NULL DEFAULT 0
);
INSERT INTO checkpoint_search_old (doc_id, checkpoint_id, session_id, project_path, model, dims, vector, vector_version)
    SELECT doc_id, checkpoint_id, session_id, project_path, model, dims, vector, vector_version FROM checkpoint_search;
DROP TABLE checkpoint_search;
ALTER TABLE checkpoint_search_old RENAME TO checkpoint_search;
CREATE INDEX checkpoint_search_version ON checkpoint_search (vector_version) WHERE vector_version > 0;

-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (doc_id, checkpoint_id, session_id, project_path)
        SELECT MAX(COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0), indexed_through, queued_through) + 1,
               new.id, new.session_id, new.project_path
        FROM search_state WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND old.doc_id <= (SELECT indexed_through FROM search_state WHERE id = 1);
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

CREATE VIEW embedding_jobs AS
    SELECT checkpoint_id, queued_at, attempts, next_attempt_at, last_error FROM embedding_queue
    UNION ALL
    SELECT s.checkpoint_id, c.created_at, 0, 0, '' FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id
    WHERE s.doc_id > (SELECT queued_through FROM search_state WHERE id = 1);
