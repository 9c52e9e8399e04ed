-- +goose Up
-- A webhook's lease: the instance delivering its events, and until when
-- (Unix nanoseconds). Another instance may take it only after that.
ALTER TABLE webhooks ADD COLUMN claim_holder TEXT NOT NULL DEFAULT '';
ALTER TABLE webhooks ADD COLUMN claim_until INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE webhooks DROP COLUMN claim_until;
ALTER TABLE webhooks DROP COLUMN claim_holder;
