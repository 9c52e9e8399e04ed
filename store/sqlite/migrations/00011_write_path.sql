-- +goose Up
-- Only checkpoints with a HITL timeout are due one day: the index of open
-- deadlines leaves out the others, so most checkpoints write one index entry
-- fewer. DueHITL and NextHITLDeadline filter on hitl_expires_at IS NOT NULL.
DROP INDEX checkpoints_due;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at)
    WHERE hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0;

-- A saved checkpoint waits in search_pending for its full-text entry, which
-- a search writes first for everything waiting, in one FTS5 segment: an FTS5
-- insert per save cost a new segment, its merges and a third of the pages
-- of a checkpoint written alone.
CREATE TABLE search_pending (
    doc_id INTEGER PRIMARY KEY
);

DROP TRIGGER checkpoints_search_insert;
-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (checkpoint_id, session_id, project_path) VALUES (new.id, new.session_id, new.project_path);
    INSERT INTO search_pending (doc_id) VALUES (last_insert_rowid());
    INSERT INTO embedding_queue (checkpoint_id, queued_at) VALUES (new.id, new.created_at);
END;
-- +goose StatementEnd

DROP TRIGGER checkpoint_search_delete;
-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND NOT EXISTS (SELECT 1 FROM search_pending WHERE doc_id = old.doc_id);
    DELETE FROM search_pending WHERE doc_id = old.doc_id;
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

-- +goose Down
INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
    SELECT s.doc_id, c.name, c.summary, c.description,
           COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(c.tags AS TEXT))), '')
    FROM search_pending p JOIN checkpoint_search s ON s.doc_id = p.doc_id JOIN checkpoints c ON c.id = s.checkpoint_id;

DROP TRIGGER checkpoint_search_delete;
-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id;
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

DROP TRIGGER checkpoints_search_insert;
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

DROP TABLE search_pending;

DROP INDEX checkpoints_due;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at) WHERE decided_at IS NULL AND timeout_fired = 0;
