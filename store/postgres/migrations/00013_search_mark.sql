-- +goose Up
-- SQLite's 00013 replaces its queue of checkpoints waiting for their
-- full-text entry by a mark; PostgreSQL writes a checkpoint's text search
-- document when it saves it. Nothing to change here; the number keeps the
-- engines' schemas in step.
SELECT 1;

-- +goose Down
SELECT 1;
