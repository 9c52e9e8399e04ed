-- +goose Up
-- A list by tag reads its page in order from the tag's entries: each entry
-- carries its checkpoint's created_at (which never changes) before the id, so
-- the entries of one tag are in the lists' order. Before, every checkpoint
-- with the tag was looked up and sorted for a page of 20: 7 ms of a 10 ms list
-- of 1,400 matches among 100,000 checkpoints. The count of a list filtered by
-- tags alone needs no checkpoint row either.
DROP TRIGGER checkpoints_tags_delete;
CREATE TABLE checkpoint_tags_new (
    tag                   TEXT NOT NULL,
    checkpoint_created_at INTEGER NOT NULL,
    checkpoint_id         TEXT NOT NULL,
    PRIMARY KEY (tag, checkpoint_created_at, checkpoint_id)
) WITHOUT ROWID;
INSERT INTO checkpoint_tags_new (tag, checkpoint_created_at, checkpoint_id)
    SELECT t.tag, c.created_at, t.checkpoint_id FROM checkpoint_tags t JOIN checkpoints c ON c.id = t.checkpoint_id;
DROP TABLE checkpoint_tags;
ALTER TABLE checkpoint_tags_new RENAME TO checkpoint_tags;

-- +goose StatementBegin
CREATE TRIGGER checkpoints_tags_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_tags
        WHERE tag IN (SELECT value FROM json_each(CAST(old.tags AS TEXT)))
            AND checkpoint_created_at = old.created_at AND checkpoint_id = old.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER checkpoints_tags_delete;
CREATE TABLE checkpoint_tags_old (
    checkpoint_id TEXT NOT NULL,
    tag           TEXT NOT NULL,
    PRIMARY KEY (tag, checkpoint_id)
) WITHOUT ROWID;
INSERT INTO checkpoint_tags_old (checkpoint_id, tag) SELECT checkpoint_id, tag FROM checkpoint_tags;
DROP TABLE checkpoint_tags;
ALTER TABLE checkpoint_tags_old RENAME TO checkpoint_tags;

-- +goose StatementBegin
CREATE TRIGGER checkpoints_tags_delete AFTER DELETE ON checkpoints BEGIN
    DELETE FROM checkpoint_tags
        WHERE tag IN (SELECT value FROM json_each(CAST(old.tags AS TEXT))) AND checkpoint_id = old.id;
END;
-- +goose StatementEnd
