-- +goose Up
-- SQLite's 00015 gives a checkpoint the doc_id of its search row, so that
-- table needs no unique index on checkpoint_id there. PostgreSQL writes a
-- checkpoint's search row itself and keeps its index. Nothing to change
-- here; the number keeps the engines' schemas in step.
SELECT 1;

-- +goose Down
SELECT 1;
