-- +goose Up
-- A request no one decided falls due at its checkpoint's expiry as well as
-- at its timeout: DueHITL and NextHITLDeadline look for expiries here. Only
-- open requests with an expiry have an entry, so other saves write nothing.
CREATE INDEX checkpoints_expiring ON checkpoints (expires_at)
    WHERE expires_at IS NOT NULL AND hitl_required = 1 AND decided_at IS NULL;

-- +goose Down
DROP INDEX checkpoints_expiring;
