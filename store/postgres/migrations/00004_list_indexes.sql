-- +goose Up
-- A list of HITL checkpoints otherwise scans every checkpoint in creation
-- order (measured by bench/checkpoints).
CREATE INDEX checkpoints_hitl ON checkpoints (created_at, id) WHERE hitl_required = 1;

-- +goose Down
DROP INDEX checkpoints_hitl;
