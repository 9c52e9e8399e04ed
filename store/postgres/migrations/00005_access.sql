-- +goose Up
-- Who besides the owner may use a session.
CREATE TABLE session_grants (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_name  TEXT NOT NULL,
    role       TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_name, session_id)
);
CREATE INDEX session_grants_session ON session_grants (session_id, created_at);
CREATE INDEX sessions_owner ON sessions (owner, created_at DESC, id DESC);

-- Tokens get an id to list and revoke them by, scopes, projects and a last use.
ALTER TABLE tokens ADD COLUMN id TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN scopes BYTEA;
ALTER TABLE tokens ADD COLUMN projects BYTEA;
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT;
ALTER TABLE tokens ADD COLUMN revoked_at BIGINT;
-- Existing tokens take an id derived from their hash (unique, and no secret).
UPDATE tokens SET id = lower(substr(hash, 1, 8) || '-' || substr(hash, 9, 4) || '-4' || substr(hash, 14, 3) || '-8' ||
    substr(hash, 18, 3) || '-' || substr(hash, 21, 12));
CREATE UNIQUE INDEX tokens_id ON tokens (id);

-- +goose Down
DROP INDEX tokens_id;
ALTER TABLE tokens DROP COLUMN revoked_at;
ALTER TABLE tokens DROP COLUMN last_used_at;
ALTER TABLE tokens DROP COLUMN projects;
ALTER TABLE tokens DROP COLUMN scopes;
ALTER TABLE tokens DROP COLUMN name;
ALTER TABLE tokens DROP COLUMN id;
DROP INDEX sessions_owner;
DROP TABLE session_grants;
