-- +goose Up
-- SQLite's 00013 replaces its queue rows of a new checkpoint (for its
-- full-text entry and for its vector) by marks; PostgreSQL writes a
-- checkpoint's text search document when it saves it and keeps its queue
-- row (ClaimEmbeddings locks rows). Nothing to change here; the number
-- keeps the engines' schemas in step.
SELECT 1;

-- +goose Down
SELECT 1;
