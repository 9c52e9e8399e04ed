-- +goose Up
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    project_path       TEXT NOT NULL DEFAULT '',
    title              TEXT NOT NULL DEFAULT '',
    owner              TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    phase              TEXT NOT NULL DEFAULT '',
    current_step       INTEGER NOT NULL DEFAULT 0,
    state              BLOB,
    head_checkpoint_id TEXT NOT NULL DEFAULT '',
    last_seq           INTEGER NOT NULL DEFAULT 0,
    checkpoint_count   INTEGER NOT NULL DEFAULT 0,
    cost               REAL NOT NULL DEFAULT 0,
    metadata           BLOB,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX sessions_created ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_project ON sessions (project_path, created_at DESC, id DESC);

CREATE TABLE checkpoints (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    name             TEXT NOT NULL DEFAULT '',
    type             TEXT NOT NULL,
    trigger_kind     TEXT NOT NULL,
    summary          TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    project_path     TEXT NOT NULL DEFAULT '',
    workspace_ref    TEXT NOT NULL DEFAULT '',
    files            BLOB,
    agent_state      BLOB,
    outputs          BLOB,
    metadata         BLOB,
    context          BLOB,
    tags             BLOB,
    phase            TEXT NOT NULL DEFAULT '',
    step             INTEGER NOT NULL DEFAULT 0,
    parent_id        TEXT NOT NULL DEFAULT '',
    checksum         TEXT NOT NULL,
    hitl_required    INTEGER NOT NULL DEFAULT 0,
    hitl             BLOB,
    hitl_expires_at  INTEGER,
    timeout_fired    INTEGER NOT NULL DEFAULT 0,
    decision         BLOB,
    decided_at       INTEGER,
    decision_key     TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER,
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
) WITHOUT ROWID;
CREATE INDEX checkpoint_tags_checkpoint ON checkpoint_tags (checkpoint_id);

CREATE TABLE events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    type          TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL DEFAULT '',
    data          BLOB,
    created_at    INTEGER NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);

CREATE TABLE rollbacks (
    id                 TEXT PRIMARY KEY,
    session_id         TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    from_checkpoint_id TEXT NOT NULL DEFAULT '',
    target_id          TEXT NOT NULL,
    reason             TEXT NOT NULL DEFAULT '',
    user_id            TEXT NOT NULL DEFAULT '',
    restored_files     BLOB,
    created_at         INTEGER NOT NULL
);
CREATE INDEX rollbacks_session ON rollbacks (session_id, created_at);

CREATE TABLE users (
    name       TEXT PRIMARY KEY,
    admin      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);

CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    user_name  TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
);

CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    secret     TEXT NOT NULL,
    events     BLOB,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);

CREATE TABLE webhook_deliveries (
    id          TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_seq   INTEGER NOT NULL,
    event_type  TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    status_code INTEGER NOT NULL DEFAULT 0,
    error       TEXT NOT NULL DEFAULT '',
    duration_ms INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, created_at DESC);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
DROP TABLE tokens;
DROP TABLE users;
DROP TABLE rollbacks;
DROP TABLE events;
DROP TABLE checkpoint_tags;
DROP TABLE checkpoints;
DROP TABLE sessions;
