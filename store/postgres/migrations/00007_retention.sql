-- +goose Up
CREATE TABLE retention (
    project_path TEXT COLLATE "C" PRIMARY KEY,
    keep_last    BIGINT NOT NULL DEFAULT 0,
    max_age      BIGINT NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE retention;
