package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
)

func TestMigrateRoundTrip(t *testing.T) {
	pg := testutil.PostgresSchema(t)
	h := newHarness(t)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(h.project, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", "package main\n")
	h.ok(t, "", "save", "-m", "first", "--tag", "start", "--description", "the first step")
	write("main.go", "package main\n\nfunc main() {}\n")
	write("notes.txt", "todo\n")
	h.ok(t, `{"step": 2}`, "save", "-m", "second", "--state-file", "-", "--name", "two")
	// A state large enough to be stored as chunks (store/chunkstore).
	big := `{"notes": "` + strings.Repeat("a note on the second step; ", 4000) + `"}`
	var large belay.Checkpoint
	if err := json.Unmarshal([]byte(h.ok(t, big, "--json", "save", "-m", "large state", "--state-file", "-")), &large); err != nil {
		t.Fatal(err)
	}
	// A state kept compressed in its row (store/chunkstore).
	mid := `{"notes": "` + strings.Repeat("a note on the third step; ", 160) + `"}`
	var compressed belay.Checkpoint
	if err := json.Unmarshal([]byte(h.ok(t, mid, "--json", "save", "-m", "compressed state", "--state-file", "-")), &compressed); err != nil {
		t.Fatal(err)
	}
	ask := okJSON[belay.Checkpoint](t, h, "ask", "Ship it?", "--option", "yes:approve", "--option", "no:reject")
	h.ok(t, "", "decide", ask.ID, "--option", "yes", "--feedback", "go")
	h.ok(t, "", "rollback", "1", "--reason", "start over")
	secret := okJSON[belay.NewToken](t, h, "token", "create", "--user", "alice", "--name", "ci").Secret
	h.ok(t, "", "webhook", "add", "https://example.com/hook", "--event", "checkpoint.created")
	h.ok(t, "", "retention", "--keep-last", "50")

	before := h.ok(t, "", "--json", "checkpoints", "--all")
	var listed struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(before), &listed); err != nil {
		t.Fatal(err)
	}
	sqliteCount := len(listed.Items)

	rep := okJSON[cli.MigrateReport](t, h, "migrate", "--to", pg)
	if !rep.OK || len(rep.Tables) == 0 || rep.NextEventSeq != rep.LastEventSeq+1 || rep.LastEventSeq == 0 {
		t.Fatalf("migrate reported %+v", rep)
	}
	counts := map[string]int64{}
	for _, c := range rep.Tables {
		if c.Source != c.Destination {
			t.Errorf("table %s: %d rows in the source, %d in the destination", c.Table, c.Source, c.Destination)
		}
		counts[c.Table] = c.Source
	}
	for _, table := range []string{"sessions", "checkpoints", "events", "rollbacks", "users", "tokens", "webhooks", "retention", "checkpoint_search", "embedding_queue", "state_chunks"} {
		if counts[table] == 0 {
			t.Errorf("no %s copied: %+v", table, rep.Tables)
		}
	}
	if rep.Snapshots == "" {
		t.Error("the report does not say where the snapshots stay")
	}

	// The copy is what the SQLite database held, and every checkpoint's
	// checksum and snapshot verify.
	if after := h.ok(t, "", "--db", pg, "--json", "checkpoints", "--all"); after != before || sqliteCount == 0 {
		t.Errorf("checkpoints on PostgreSQL:\n%s\non SQLite:\n%s", after, before)
	}
	if out := h.ok(t, "", "--db", pg, "validate"); !strings.Contains(out, "No problems") {
		t.Errorf("validate on PostgreSQL printed %q", out)
	}
	for _, c := range []struct {
		what, id, state string
	}{{"large", large.ID, big}, {"compressed", compressed.ID, mid}} {
		var want, got bytes.Buffer
		if err := json.Compact(&want, []byte(c.state)); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&got, okJSON[belay.Checkpoint](t, h, "--db", pg, "show", c.id).AgentState); err != nil || got.String() != want.String() {
			t.Errorf("the %s state on PostgreSQL is %d bytes, want %d (%v)", c.what, got.Len(), want.Len(), err)
		}
	}
	decided := okJSON[belay.Checkpoint](t, h, "--db", pg, "show", ask.ID)
	if decided.Decision == nil || decided.Decision.SelectedOption != "yes" {
		t.Errorf("the decision on PostgreSQL: %+v", decided.Decision)
	}
	text := h.ok(t, "", "--db", pg, "rollbacks")
	if !strings.Contains(text, "start over") {
		t.Errorf("rollbacks on PostgreSQL: %q", text)
	}
	if out := h.ok(t, "", "--db", pg, "webhook", "list"); !strings.Contains(out, "https://example.com/hook") {
		t.Errorf("webhooks on PostgreSQL: %q", out)
	}

	ctx := t.Context()
	db, err := postgres.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	defer svc.Close()
	actor, err := svc.Authenticate(ctx, secret)
	if err != nil || actor.UserID != "alice" {
		t.Errorf("the token on PostgreSQL: %+v, %v", actor, err)
	}

	// The event log continues after the last copied event, without a gap.
	h.ok(t, "", "--db", pg, "save", "-m", "third")
	events, err := db.ListEvents(ctx, store.EventQuery{Scope: store.Everything, After: rep.LastEventSeq, Limit: 10})
	if err != nil || len(events) == 0 || events[0].Seq != rep.LastEventSeq+1 {
		t.Errorf("events after %d: %+v, %v", rep.LastEventSeq, events, err)
	}
	all, err := db.ListEvents(ctx, store.EventQuery{Scope: store.Everything, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	// Search finds copied checkpoints (the text index is rebuilt).
	if out := h.ok(t, "", "--db", pg, "search", "first step"); !strings.Contains(out, "first") {
		t.Errorf("search on PostgreSQL: %q", out)
	}
}

func TestMigrateRefuses(t *testing.T) {
	pg := testutil.PostgresSchema(t)
	h := newHarness(t)
	if err := os.WriteFile(filepath.Join(h.project, "a.txt"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing to copy yet.
	r := h.run(t, "", "--json", "migrate", "--to", pg)
	if r.code != cli.ExitError || !strings.Contains(r.stdout+r.stderr, "NOT_FOUND") {
		t.Errorf("migrate without a database: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	h.ok(t, "", "save", "-m", "one")
	for _, bad := range []string{"http://example.com/db", "postgres://", "belay.db"} {
		r := h.run(t, "", "--json", "migrate", "--to", bad)
		if r.code != cli.ExitError || !strings.Contains(r.stdout+r.stderr, "VALIDATION_ERROR") {
			t.Errorf("migrate --to %s: exit %d, %s%s", bad, r.code, r.stdout, r.stderr)
		}
	}
	if r := h.run(t, "", "migrate"); r.code != cli.ExitUsage {
		t.Errorf("migrate without --to: exit %d", r.code)
	}
	unreachable := "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	if r := h.run(t, "", "migrate", "--to", unreachable); r.code != cli.ExitError || !strings.Contains(r.stderr, "cannot be reached") || !strings.Contains(r.stderr, "STORAGE_UNAVAILABLE") {
		t.Errorf("migrate to an unreachable server: exit %d, %s", r.code, r.stderr)
	}

	h.ok(t, "", "migrate", "--to", pg)
	h.ok(t, "", "save", "-m", "two")
	r = h.run(t, "", "--json", "migrate", "--to", pg)
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "CONFLICT") || !strings.Contains(r.stderr, "sessions") {
		t.Errorf("migrate into a non-empty database: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	// The refused copy changed nothing.
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(h.ok(t, "", "--db", pg, "--json", "checkpoints", "--all")), &list); err != nil || len(list.Items) != 1 {
		t.Errorf("after the refusal the destination lists %d checkpoints (%v)", len(list.Items), err)
	}
}
