-- +goose Up
-- SQLite's 00021 gives its tag entries their checkpoint's created_at, for its
-- lists by tag; PostgreSQL keeps its tables as they are. The version keeps the
-- two schemas' numbers equal, which `belay migrate` requires (the copy takes
-- the columns both tables have).

-- +goose Down
