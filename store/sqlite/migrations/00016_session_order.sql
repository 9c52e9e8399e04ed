-- +goose Up
-- A session's checkpoints list in the session's own order, by seq, which
-- the (session_id, seq) unique index already serves; the index by
-- (session_id, created_at) only cost every save a page, and every session in
-- a batch of saves one more.
DROP INDEX checkpoints_session;

-- +goose Down
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at);
