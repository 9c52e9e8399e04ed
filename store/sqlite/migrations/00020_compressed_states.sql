-- +goose Up
-- No table changes: from this version on, an agent state of 1 KiB to 64 KiB
-- may be kept in its row compressed (a first byte of 1, see store/chunkstore),
-- which a belay that predates it would read as the state itself. The version
-- makes such a belay refuse the database (SCHEMA_TOO_NEW) instead.

-- +goose Down
-- Compressed states stay as they are: SQL cannot decompress them, so a belay
-- of the version before cannot read them.
