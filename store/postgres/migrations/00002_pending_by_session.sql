-- +goose Up
-- Deciding asks whether a session has other open requests; without this index
-- SQLite walks the session's whole history to answer.
CREATE INDEX checkpoints_pending_session ON checkpoints (session_id, created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;
DROP INDEX checkpoints_pending;
CREATE INDEX checkpoints_pending ON checkpoints (created_at, id)
    WHERE hitl_required = 1 AND decided_at IS NULL;

-- +goose Down
DROP INDEX checkpoints_pending;
CREATE INDEX checkpoints_pending ON checkpoints (hitl_required, decided_at, created_at)
    WHERE hitl_required = 1 AND decided_at IS NULL;
DROP INDEX checkpoints_pending_session;
