-- +goose Up
-- SQLite's 00017 makes doc_id the checkpoints' key and writes a search row
-- only with a vector. PostgreSQL keeps a search row for every checkpoint
-- (it holds the text search document). Nothing to change here; the number
-- keeps the engines' schemas in step.
SELECT 1;

-- +goose Down
SELECT 1;
