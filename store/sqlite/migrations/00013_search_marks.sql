-- +goose Up
-- A save writes neither a queue row for its full-text entry nor one for its
-- vector (a page each, two for the embedding queue and its index): the
-- checkpoint_search rows above a mark in search_state wait for them.
-- indexed_through: a search writes the full-text entries above it and moves
-- it. queued_through: the rows above it wait for their vector as if queued
-- when their checkpoint was saved; whatever changes the queue first writes
-- their embedding_queue rows and moves it. The insert trigger gives a new
-- row a doc_id above both marks, even when the highest was deleted.
ALTER TABLE search_state ADD COLUMN indexed_through INTEGER NOT NULL DEFAULT 0;
ALTER TABLE search_state ADD COLUMN queued_through INTEGER NOT NULL DEFAULT 0;

INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
    SELECT s.doc_id, c.name, c.summary, c.description,
           COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(c.tags AS TEXT))), '')
    FROM search_pending p JOIN checkpoint_search s ON s.doc_id = p.doc_id JOIN checkpoints c ON c.id = s.checkpoint_id;
UPDATE search_state SET indexed_through = COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0),
    queued_through = COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0) WHERE id = 1;

-- Every checkpoint waiting for its vector: the queue's rows and those above
-- the mark.
CREATE VIEW embedding_jobs AS
    SELECT checkpoint_id, queued_at, attempts, next_attempt_at, last_error FROM embedding_queue
    UNION ALL
    SELECT s.checkpoint_id, c.created_at, 0, 0, '' FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id
    WHERE s.doc_id > (SELECT queued_through FROM search_state WHERE id = 1);

DROP TRIGGER checkpoints_search_insert;
-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (doc_id, checkpoint_id, session_id, project_path)
        SELECT MAX(COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0), indexed_through, queued_through) + 1,
               new.id, new.session_id, new.project_path
        FROM search_state WHERE id = 1;
END;
-- +goose StatementEnd

DROP TRIGGER checkpoint_search_delete;
-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND old.doc_id <= (SELECT indexed_through FROM search_state WHERE id = 1);
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

DROP TABLE search_pending;

-- +goose Down
CREATE TABLE search_pending (
    doc_id INTEGER PRIMARY KEY
);
INSERT INTO search_pending (doc_id)
    SELECT doc_id FROM checkpoint_search WHERE doc_id > (SELECT indexed_through FROM search_state WHERE id = 1);
INSERT INTO embedding_queue (checkpoint_id, queued_at)
    SELECT checkpoint_id, queued_at FROM embedding_jobs WHERE true
    ON CONFLICT (checkpoint_id) DO NOTHING;

DROP TRIGGER checkpoint_search_delete;
-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND NOT EXISTS (SELECT 1 FROM search_pending WHERE doc_id = old.doc_id);
    DELETE FROM search_pending WHERE doc_id = old.doc_id;
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

DROP TRIGGER checkpoints_search_insert;
-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path) VALUES (new.id, new.session_id, new.project_path);
    INSERT INTO search_pending (doc_id) VALUES (last_insert_rowid());
    INSERT INTO embedding_queue (checkpoint_id, queued_at) VALUES (new.id, new.created_at);
END;
-- +goose StatementEnd

DROP VIEW embedding_jobs;
ALTER TABLE search_state DROP COLUMN queued_through;
ALTER TABLE search_state DROP COLUMN indexed_through;
