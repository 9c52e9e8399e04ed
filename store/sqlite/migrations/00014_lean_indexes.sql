-- +goose Up
-- Every index a save touches is one more page it writes. Two go:
--
-- The lists' indexes end at created_at: the rowid SQLite appends to each
-- entry makes it unique, and a list sorts just the checkpoints of one
-- instant by id. Without the id (36 bytes) an entry is a fraction of its
-- size, so the index's last page fills, and is rebalanced with its
-- neighbours (three more pages written), far less often.
DROP INDEX checkpoints_created;
CREATE INDEX checkpoints_created ON checkpoints (created_at);
DROP INDEX checkpoints_session;
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at);
DROP INDEX checkpoints_type;
CREATE INDEX checkpoints_type ON checkpoints (type, created_at);
DROP INDEX checkpoints_project;
CREATE INDEX checkpoints_project ON checkpoints (project_path, created_at);

-- Tags are found by tag alone: the index by checkpoint served only the
-- cascade of a checkpoint's deletion to its tags. A trigger deletes them
-- instead, looked up by the tags the checkpoint's row lists (the two always
-- agree: both are written once, when the checkpoint is saved).
CREATE TABLE checkpoint_tags_new (
    checkpoint_id TEXT NOT NULL,
    tag           TEXT NOT NULL,
    PRIMARY KEY (tag, checkpoint_id)
) WITHOUT ROWID;
INSERT INTO checkpoint_tags_new (checkpoint_id, tag) SELECT checkpoint_id, tag FROM checkpoint_tags;
DROP TABLE checkpoint_tags;
ALTER TABLE checkpoint_tags_new RENAME TO checkpoint_tags;

-- +goose StatementBegin
CREATE TRIGGER checkpoints_tags_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_tags
        WHERE tag IN (SELECT value FROM json_each(CAST(old.tags AS TEXT))) AND checkpoint_id = old.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER checkpoints_tags_delete;
CREATE TABLE checkpoint_tags_old (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    PRIMARY KEY (tag, checkpoint_id)
) WITHOUT ROWID;
INSERT INTO checkpoint_tags_old (checkpoint_id, tag) SELECT checkpoint_id, tag FROM checkpoint_tags;
DROP TABLE checkpoint_tags;
ALTER TABLE checkpoint_tags_old RENAME TO checkpoint_tags;
CREATE INDEX checkpoint_tags_checkpoint ON checkpoint_tags (checkpoint_id);

DROP INDEX checkpoints_project;
CREATE INDEX checkpoints_project ON checkpoints (project_path, created_at, id);
DROP INDEX checkpoints_type;
CREATE INDEX checkpoints_type ON checkpoints (type, created_at, id);
DROP INDEX checkpoints_session;
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at, id);
DROP INDEX checkpoints_created;
CREATE INDEX checkpoints_created ON checkpoints (created_at, id);
