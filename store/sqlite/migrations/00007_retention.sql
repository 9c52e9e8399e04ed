-- +goose Up
CREATE TABLE retention (
    project_path TEXT PRIMARY KEY,
    keep_last    INTEGER NOT NULL DEFAULT 0,
    max_age      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- +goose Down
DROP TABLE retention;
