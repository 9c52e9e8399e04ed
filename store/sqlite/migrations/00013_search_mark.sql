-- +goose Up
-- The checkpoints waiting for their full-text entry are those whose doc_id
-- is above search_state.indexed_through: a search writes their entries and
-- moves the mark. A save no longer writes a search_pending row (a page of
-- its own); the insert trigger gives a new checkpoint a doc_id above the
-- mark, even when the highest one was deleted after a search.
ALTER TABLE search_state ADD COLUMN indexed_through INTEGER NOT NULL DEFAULT 0;

INSERT INTO checkpoint_fts (rowid, name, summary, description, tags)
    SELECT s.doc_id, c.name, c.summary, c.description,
           COALESCE((SELECT group_concat(value, ' ') FROM json_each(CAST(c.tags AS TEXT))), '')
    FROM search_pending p JOIN checkpoint_search s ON s.doc_id = p.doc_id JOIN checkpoints c ON c.id = s.checkpoint_id;
UPDATE search_state SET indexed_through = COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0) WHERE id = 1;

DROP TRIGGER checkpoints_search_insert;
-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_insert AFTER INSERT ON checkpoints BEGIN
    INSERT INTO checkpoint_search (doc_id, checkpoint_id, session_id, project_path)
        VALUES (MAX(COALESCE((SELECT MAX(doc_id) FROM checkpoint_search), 0),
                    (SELECT indexed_through FROM search_state WHERE id = 1)) + 1,
                new.id, new.session_id, new.project_path);
    INSERT INTO embedding_queue (checkpoint_id, queued_at) VALUES (new.id, new.created_at);
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

ALTER TABLE search_state DROP COLUMN indexed_through;
