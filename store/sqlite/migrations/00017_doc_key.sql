-- +goose Up
-- A checkpoint's doc_id becomes its rowid (INTEGER PRIMARY KEY). The
-- checkpoints saved since the last search or embedding pass (doc_id above
-- search_state's marks) are then a range of the table itself, and a save no
-- longer writes a checkpoint_search row by trigger: one page and a trigger
-- less per save. A checkpoint_search row is written with the checkpoint's
-- vector; the full-text entry is deleted with the checkpoint.
DROP VIEW embedding_jobs;
DROP TRIGGER checkpoint_search_delete;
-- Dropping checkpoints would delete the queue rows through their foreign
-- key: keep them aside.
CREATE TEMP TABLE embedding_queue_kept AS SELECT * FROM embedding_queue;
DELETE FROM embedding_queue;
CREATE TABLE checkpoints_new (
    doc_id           INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    name             TEXT NOT NULL DEFAULT '',
    type             TEXT NOT NULL,
    trigger_kind     TEXT NOT NULL,
    summary          TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    project_path     TEXT NOT NULL DEFAULT '',
    workspace_ref    TEXT NOT NULL DEFAULT '',
    files            BLOB,
    agent_state      BLOB,
    outputs          BLOB,
    metadata         BLOB,
    context          BLOB,
    tags             BLOB,
    phase            TEXT NOT NULL DEFAULT '',
    step             INTEGER NOT NULL DEFAULT 0,
    parent_id        TEXT NOT NULL DEFAULT '',
    checksum         TEXT NOT NULL,
    hitl_required    INTEGER NOT NULL DEFAULT 0,
    hitl             BLOB,
    hitl_expires_at  INTEGER,
    timeout_fired    INTEGER NOT NULL DEFAULT 0,
    decision         BLOB,
    decided_at       INTEGER,
    decision_key     TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER,
    token_count      INTEGER NOT NULL DEFAULT 0,
    token_encoding   TEXT NOT NULL DEFAULT '',
    updated_at       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, seq)
);
INSERT INTO checkpoints_new (doc_id, id, session_id, seq, name, type, trigger_kind, summary, description,
    project_path, workspace_ref, files, agent_state, outputs, metadata, context, tags, phase, step, parent_id,
    checksum, hitl_required, hitl, hitl_expires_at, timeout_fired, decision, decided_at, decision_key,
    created_by, created_at, expires_at, token_count, token_encoding, updated_at)
SELECT doc_id, id, session_id, seq, name, type, trigger_kind, summary, description,
    project_path, workspace_ref, files, agent_state, outputs, metadata, context, tags, phase, step, parent_id,
    checksum, hitl_required, hitl, hitl_expires_at, timeout_fired, decision, decided_at, decision_key,
    created_by, created_at, expires_at, token_count, token_encoding, updated_at
FROM checkpoints ORDER BY doc_id;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_new RENAME TO checkpoints;
INSERT INTO embedding_queue SELECT * FROM embedding_queue_kept;
DROP TABLE embedding_queue_kept;

CREATE INDEX checkpoints_pending_session ON checkpoints (session_id, created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;
CREATE INDEX checkpoints_pending ON checkpoints (created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;
CREATE INDEX checkpoints_hitl ON checkpoints (created_at, id) WHERE hitl_required = 1;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at)
    WHERE hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0;
CREATE INDEX checkpoints_created ON checkpoints (created_at);
CREATE INDEX checkpoints_type ON checkpoints (type, created_at);
CREATE INDEX checkpoints_project ON checkpoints (project_path, created_at);

-- +goose StatementBegin
CREATE TRIGGER checkpoints_tags_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_tags
        WHERE tag IN (SELECT value FROM json_each(CAST(old.tags AS TEXT))) AND checkpoint_id = old.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER checkpoints_search_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_fts WHERE rowid = old.doc_id
        AND old.doc_id <= (SELECT indexed_through FROM search_state WHERE id = 1);
    DELETE FROM checkpoint_search WHERE doc_id = old.doc_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER checkpoint_search_delete AFTER DELETE ON checkpoint_search BEGIN
    UPDATE search_state SET removed = removed + 1 WHERE old.vector_version > 0;
END;
-- +goose StatementEnd

CREATE VIEW embedding_jobs AS
    SELECT checkpoint_id, queued_at, attempts, next_attempt_at, last_error FROM embedding_queue
    UNION ALL
    SELECT id, created_at, 0, 0, '' FROM checkpoints
    WHERE doc_id > (SELECT queued_through FROM search_state WHERE id = 1);

-- What belay migrate copies into PostgreSQL's checkpoint_search, which holds a
-- row for every checkpoint.
CREATE VIEW checkpoint_search_all AS
    SELECT c.doc_id, c.id AS checkpoint_id, c.session_id, c.project_path,
        COALESCE(s.model, '') AS model, COALESCE(s.dims, 0) AS dims, s.vector,
        COALESCE(s.vector_version, 0) AS vector_version
    FROM checkpoints c LEFT JOIN checkpoint_search s ON s.doc_id = c.doc_id;

-- +goose Down
DROP VIEW checkpoint_search_all;
DROP VIEW embedding_jobs;
DROP TRIGGER checkpoint_search_delete;
INSERT INTO checkpoint_search (doc_id, checkpoint_id, session_id, project_path)
    SELECT doc_id, id, session_id, project_path FROM checkpoints
    WHERE doc_id NOT IN (SELECT doc_id FROM checkpoint_search);
CREATE TEMP TABLE embedding_queue_kept AS SELECT * FROM embedding_queue;
DELETE FROM embedding_queue;
CREATE TABLE checkpoints_old (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    name             TEXT NOT NULL DEFAULT '',
    type             TEXT NOT NULL,
    trigger_kind     TEXT NOT NULL,
    summary          TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    project_path     TEXT NOT NULL DEFAULT '',
    workspace_ref    TEXT NOT NULL DEFAULT '',
    files            BLOB,
    agent_state      BLOB,
    outputs          BLOB,
    metadata         BLOB,
    context          BLOB,
    tags             BLOB,
    phase            TEXT NOT NULL DEFAULT '',
    step             INTEGER NOT NULL DEFAULT 0,
    parent_id        TEXT NOT NULL DEFAULT '',
    checksum         TEXT NOT NULL,
    hitl_required    INTEGER NOT NULL DEFAULT 0,
    hitl             BLOB,
    hitl_expires_at  INTEGER,
    timeout_fired    INTEGER NOT NULL DEFAULT 0,
    decision         BLOB,
    decided_at       INTEGER,
    decision_key     TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER,
    token_count      INTEGER NOT NULL DEFAULT 0,
    token_encoding   TEXT NOT NULL DEFAULT '',
    updated_at       INTEGER NOT NULL DEFAULT 0,
    doc_id           INTEGER,
    UNIQUE (session_id, seq)
);
INSERT INTO checkpoints_old (id, session_id, seq, name, type, trigger_kind, summary, description,
    project_path, workspace_ref, files, agent_state, outputs, metadata, context, tags, phase, step, parent_id,
    checksum, hitl_required, hitl, hitl_expires_at, timeout_fired, decision, decided_at, decision_key,
    created_by, created_at, expires_at, token_count, token_encoding, updated_at, doc_id)
SELECT id, session_id, seq, name, type, trigger_kind, summary, description,
    project_path, workspace_ref, files, agent_state, outputs, metadata, context, tags, phase, step, parent_id,
    checksum, hitl_required, hitl, hitl_expires_at, timeout_fired, decision, decided_at, decision_key,
    created_by, created_at, expires_at, token_count, token_encoding, updated_at, doc_id
FROM checkpoints ORDER BY doc_id;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_old RENAME TO checkpoints;
INSERT INTO embedding_queue SELECT * FROM embedding_queue_kept;
DROP TABLE embedding_queue_kept;

CREATE INDEX checkpoints_pending_session ON checkpoints (session_id, created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;
CREATE INDEX checkpoints_pending ON checkpoints (created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;
CREATE INDEX checkpoints_hitl ON checkpoints (created_at, id) WHERE hitl_required = 1;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at)
    WHERE hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0;
CREATE INDEX checkpoints_created ON checkpoints (created_at);
CREATE INDEX checkpoints_type ON checkpoints (type, created_at);
CREATE INDEX checkpoints_project ON checkpoints (project_path, created_at);

-- +goose StatementBegin
CREATE TRIGGER checkpoints_tags_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_tags
        WHERE tag IN (SELECT value FROM json_each(CAST(old.tags AS TEXT))) AND checkpoint_id = old.id;
END;
-- +goose StatementEnd

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
