-- +goose Up
-- The chunks of large agent states (store/chunkstore), each stored once
-- under the SHA-256 of its bytes and shared by every state that contains
-- it. The state column of a checkpoint or session with a large state holds
-- the root that lists its chunks instead of the state.
CREATE TABLE state_chunks (
    hash BYTEA PRIMARY KEY,
    size BIGINT NOT NULL,
    data BYTEA NOT NULL
);

-- +goose Down
DROP TABLE state_chunks;
