-- +goose Up
-- Before it delivers an event, the dispatcher reads the last attempt recorded
-- for it, so that attempts count across restarts and instances; this finds
-- it without reading the webhook's whole delivery log.
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_seq, attempt);

-- +goose Down
DROP INDEX webhook_deliveries_event;
