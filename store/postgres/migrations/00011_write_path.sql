-- +goose Up
-- Only checkpoints with a HITL timeout are due one day: the index of open
-- deadlines leaves out the others, so most checkpoints write one index entry
-- fewer. DueHITL and NextHITLDeadline filter on hitl_expires_at IS NOT NULL.
DROP INDEX checkpoints_due;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at)
    WHERE hitl_expires_at IS NOT NULL AND decided_at IS NULL AND timeout_fired = 0;

-- +goose Down
DROP INDEX checkpoints_due;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at) WHERE decided_at IS NULL AND timeout_fired = 0;
