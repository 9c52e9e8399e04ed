-- +goose Up
-- Settings every instance of one deployment shares, written once by whichever
-- instance needs one first: the key that seals dashboard sign-in cookies.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

-- Dashboard sign-ins signed out before they ended (their sealed cookies carry
-- the id), kept until they would have ended.
CREATE TABLE signouts (
    id    TEXT PRIMARY KEY,
    until BIGINT NOT NULL
);

-- +goose Down
DROP TABLE signouts;
DROP TABLE settings;
