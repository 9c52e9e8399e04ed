-- +goose Up
-- List filters that combine session and type, or ask for HITL checkpoints,
-- otherwise scan every checkpoint in creation order (measured by bench/checkpoints).
CREATE INDEX checkpoints_session_type ON checkpoints (session_id, type, created_at, id);
CREATE INDEX checkpoints_hitl ON checkpoints (created_at, id) WHERE hitl_required = 1;

-- +goose Down
DROP INDEX checkpoints_hitl;
DROP INDEX checkpoints_session_type;
