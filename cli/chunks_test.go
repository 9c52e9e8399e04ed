package cli_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	_ "github.com/belayhq/belay/store/sqlite" // the "sqlite" database/sql driver
)

// TestDamagedStateAffectsOnlyItsCheckpoint: with the chunks of one large
// state gone, validate reports that checkpoint with its ways out (and says
// --repair cannot rebuild it without a snapshot), the list shows the others
// and says which one it left out, and du counts the state from its root.
func TestDamagedStateAffectsOnlyItsCheckpoint(t *testing.T) {
	project := t.TempDir()
	c := newWSCLI(t, project)
	docs := make([]string, 100)
	for i := range docs {
		docs[i] = strings.Repeat(string(rune('a'+i%26)), 1000) + strings.Repeat("z", i)
	}
	big, err := json.Marshal(map[string]any{"docs": docs})
	if err != nil {
		t.Fatal(err)
	}
	small := []byte(`{"step":2}`)
	bigFile, smallFile := filepath.Join(t.TempDir(), "big.json"), filepath.Join(t.TempDir(), "small.json")
	for f, b := range map[string][]byte{bigFile: big, smallFile: small} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one := wsJSON[belay.Checkpoint](t, c, "save", "-m", "large state", "--no-snapshot", "--state-file", bigFile)
	two := wsJSON[belay.Checkpoint](t, c, "save", "-m", "small state", "--no-snapshot", "--state-file", smallFile)

	db, err := sql.Open("sqlite", filepath.Join(c.data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.ExecContext(t.Context(), `DELETE FROM state_chunks`)
	db.Close()
	if n, _ := res.RowsAffected(); err != nil || n == 0 {
		t.Fatalf("deleting the chunks: %d, %v", n, err)
	}

	code, out, errOut := c.run("validate")
	if code != cli.ExitError {
		t.Fatalf("validate: exit %d, want %d\n%s\n%s", code, cli.ExitError, out, errOut)
	}
	for _, want := range []string{"Checked 1 sessions, 2 checkpoints", "CHECKPOINT CORRUPTED: cp-01",
		"the agent state of checkpoint #1 cannot be read back: a chunk of the state is missing", "go on without it: checkpoint #1 stays unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cp-02") {
		t.Errorf("validate reports the intact checkpoint:\n%s", out)
	}
	code, out, _ = c.run("--json", "validate", "--repair")
	var rep belay.ValidationReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != cli.ExitError {
		t.Fatalf("validate --repair: exit %d, %v\n%s", code, err, out)
	}
	if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].CheckpointID != one.ID || rep.Problems[0].Repaired ||
		!strings.Contains(rep.Problems[0].Message, "nothing can rebuild it") {
		t.Fatalf("validate --repair = %+v", rep)
	}

	out = c.ok(t, "checkpoints")
	if !strings.Contains(out, "small state") || !strings.Contains(out, "left out: the agent state of checkpoint #1 ("+one.ID+")") {
		t.Errorf("checkpoints printed:\n%s", out)
	}
	list := wsJSON[belay.CheckpointList](t, c, "checkpoints")
	if len(list.Items) != 1 || list.Items[0].ID != two.ID || len(list.Corrupted) != 1 || list.Corrupted[0].Code != belay.CodeCheckpointCorrupt {
		t.Errorf("checkpoints --json = %+v", list)
	}
	c.fails(t, cli.ExitError, "show", one.ID)

	du := wsJSON[belay.DiskUsageReport](t, c, "du")
	if len(du.Sessions) != 1 || du.Sessions[0].Checkpoints != 2 || du.Sessions[0].StateBytes != int64(len(big)+len(small)) {
		t.Errorf("du --json = %+v; want 2 checkpoints of %d bytes", du.Sessions, len(big)+len(small))
	}
}
