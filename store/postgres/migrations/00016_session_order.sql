-- +goose Up
-- A session's checkpoints list in the session's own order, by seq, which
-- the (session_id, seq) unique index already serves.
DROP INDEX checkpoints_session;

-- +goose Down
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at, id);
