-- +goose Up
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    project_path       TEXT COLLATE "C" NOT NULL DEFAULT '',
    title              TEXT NOT NULL DEFAULT '',
    owner              TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    phase              TEXT NOT NULL DEFAULT '',
    current_step       BIGINT NOT NULL DEFAULT 0,
    state              BYTEA,
    head_checkpoint_id TEXT NOT NULL DEFAULT '',
    last_seq           BIGINT NOT NULL DEFAULT 0,
    checkpoint_count   BIGINT NOT NULL DEFAULT 0,
    cost               REAL NOT NULL DEFAULT 0,
    metadata           BYTEA,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX sessions_created ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_project ON sessions (project_path, created_at DESC, id DESC);

CREATE TABLE checkpoints (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq              BIGINT NOT NULL,
    name             TEXT NOT NULL DEFAULT '',
    type             TEXT NOT NULL,
    trigger_kind     TEXT NOT NULL,
    summary          TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    project_path     TEXT COLLATE "C" NOT NULL DEFAULT '',
    workspace_ref    TEXT NOT NULL DEFAULT '',
    files            BYTEA,
    agent_state      BYTEA,
    outputs          BYTEA,
    metadata         BYTEA,
    context          BYTEA,
    tags             BYTEA,
    phase            TEXT NOT NULL DEFAULT '',
    step             BIGINT NOT NULL DEFAULT 0,
    parent_id        TEXT NOT NULL DEFAULT '',
    checksum         TEXT NOT NULL,
    hitl_required    BIGINT NOT NULL DEFAULT 0,
    hitl             BYTEA,
    hitl_expires_at  BIGINT,
    timeout_fired    BIGINT NOT NULL DEFAULT 0,
    decision         BYTEA,
    decided_at       BIGINT,
    decision_key     TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT,
    UNIQUE (session_id, seq)
);
CREATE INDEX checkpoints_created ON checkpoints (created_at, id);
CREATE INDEX checkpoints_session ON checkpoints (session_id, created_at, id);
CREATE INDEX checkpoints_type ON checkpoints (type, created_at, id);
CREATE INDEX checkpoints_project ON checkpoints (project_path, created_at, id);
CREATE INDEX checkpoints_pending ON checkpoints (hitl_required, decided_at, created_at) WHERE hitl_required = 1 AND decided_at IS NULL;
CREATE INDEX checkpoints_due ON checkpoints (hitl_expires_at) WHERE decided_at IS NULL AND timeout_fired = 0;

CREATE TABLE checkpoint_tags (
    checkpoint_id TEXT NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    PRIMARY KEY (tag, checkpoint_id)
);
CREATE INDEX checkpoint_tags_checkpoint ON checkpoint_tags (checkpoint_id);

CREATE TABLE events (
    seq           BIGINT PRIMARY KEY,
    type          TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL DEFAULT '',
    data          BYTEA,
    created_at    BIGINT NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);

-- One row: the last event sequence number handed out. Appending an event
-- updates it, so appenders queue on its lock in commit order and a
-- rolled-back number is handed out again: gap-free, as the log promises.
CREATE TABLE event_counter (seq BIGINT NOT NULL);
INSERT INTO event_counter VALUES (0);

CREATE TABLE rollbacks (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    from_checkpoint_id TEXT NOT NULL DEFAULT '',
    target_id          TEXT NOT NULL,
    reason             TEXT NOT NULL DEFAULT '',
    user_id            TEXT NOT NULL DEFAULT '',
    restored_files     BYTEA,
    created_at         BIGINT NOT NULL
);
CREATE INDEX rollbacks_session ON rollbacks (session_id, created_at);

CREATE TABLE users (
    name       TEXT PRIMARY KEY,
    admin      BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    user_name  TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    created_at BIGINT NOT NULL
);

CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    secret     TEXT NOT NULL,
    events     BYTEA,
    last_seq   BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    id          TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_seq   BIGINT NOT NULL,
    event_type  TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    status_code BIGINT NOT NULL DEFAULT 0,
    error       TEXT NOT NULL DEFAULT '',
    duration_ms BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, created_at DESC);

-- +goose Down
DROP TABLE event_counter;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
DROP TABLE tokens;
DROP TABLE users;
DROP TABLE rollbacks;
DROP TABLE events;
DROP TABLE checkpoint_tags;
DROP TABLE checkpoints;
DROP TABLE sessions;
