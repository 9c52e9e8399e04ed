-- +goose Up
-- Leases (who runs a session until when), why it ended, its plan and its
-- exact cost in millionths of a dollar.
ALTER TABLE sessions ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN lease_expires_at BIGINT;
ALTER TABLE sessions ADD COLUMN end_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN plan BYTEA;
ALTER TABLE sessions ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sessions_lease ON sessions (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

-- +goose Down
DROP INDEX sessions_lease;
ALTER TABLE sessions DROP COLUMN cost_micros;
ALTER TABLE sessions DROP COLUMN plan;
ALTER TABLE sessions DROP COLUMN end_reason;
ALTER TABLE sessions DROP COLUMN lease_expires_at;
ALTER TABLE sessions DROP COLUMN holder;
