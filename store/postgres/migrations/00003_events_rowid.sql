-- +goose Up
-- Event sequence numbers come from event_counter (00001): gap-free and in
-- commit order. Nothing to change here; the number keeps the engines' schemas
-- in step.
SELECT 1;

-- +goose Down
SELECT 1;
