package cli_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

var (
	crashRounds = flag.Int("crash.rounds", 12, "rounds of TestCrashKilledSaveAndRollback")
	crashSeed   = flag.Uint64("crash.seed", 0, "random seed of TestCrashKilledSaveAndRollback (0: from the clock)")
)

// crashEnv runs the real belay binary on one project.
type crashEnv struct {
	t              *testing.T
	bin, project   string
	stateDir       string
	env            []string
	rng            *rand.Rand
	contents       map[int64]map[string]string // checkpoint seq → its files
	states         map[int64]string            // checkpoint seq → its agent state
	saveD, restD   time.Duration               // how long an uninterrupted save and rollback take
	killedMidGit   int                         // kills that found a git child running
	killedDuringOp int                         // kills before the command finished
}

func (c *crashEnv) run(args ...string) (int, string, string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env = c.project, c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		c.t.Fatalf("run belay %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func (c *crashEnv) ok(args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run(args...)
	if code != 0 {
		c.t.Fatalf("belay %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func crashJSON[T any](c *crashEnv, args ...string) T {
	c.t.Helper()
	var v T
	out := c.ok(append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		c.t.Fatalf("belay --json %v: %v\n%s", args, err, out)
	}
	return v
}

// killAfter runs belay in a process group of its own and kills the whole
// group — belay and its git children — with SIGKILL after d, unless it
// finished before. It reports whether it was killed.
func (c *crashEnv) killAfter(d time.Duration, args ...string) bool {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env = c.project, c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(d):
	}
	if gitRunning(cmd.Process.Pid) {
		c.killedMidGit++
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	c.killedDuringOp++
	return true
}

// gitRunning reports whether a process of the group pgid other than its
// leader runs (a git child), from /proc where there is one.
func gitRunning(pgid int) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		_, rest, ok := strings.Cut(string(data), ") ")
		fields := strings.Fields(rest)
		if !ok || len(fields) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(string(data))[0])
		if group, _ := strconv.Atoi(fields[2]); group == pgid && pid != pgid {
			return true
		}
	}
	return false
}

// edit changes the project so that it matches no earlier state: rewrites
// some files, deletes some, creates some.
func (c *crashEnv) edit(round int) {
	c.t.Helper()
	files := map[string]string{}
	for range 60 {
		files[fmt.Sprintf("src/d%d/f%03d.txt", c.rng.IntN(10), c.rng.IntN(30))] = fmt.Sprintf("round %d %d\n", round, c.rng.Int())
	}
	for i := range 5 {
		files[fmt.Sprintf("new/r%03d-%d.txt", round, i)] = "created\n"
	}
	testtree.Write(c.t, c.project, files)
	names := slices.Sorted(maps.Keys(testtree.Read(c.t, c.project)))
	for range 5 {
		os.Remove(filepath.Join(c.project, names[c.rng.IntN(len(names))]))
	}
}

// save saves the project as it is, unkilled, and records its content.
func (c *crashEnv) save(summary string) int64 {
	c.t.Helper()
	state := fmt.Sprintf(`{"saved":%q}`, summary)
	file := filepath.Join(c.stateDir, "state.json")
	if err := os.WriteFile(file, []byte(state), 0o600); err != nil {
		c.t.Fatal(err)
	}
	cp := crashJSON[belay.Checkpoint](c, "save", "-m", summary, "--state-file", file)
	c.contents[cp.Seq], c.states[cp.Seq] = testtree.Read(c.t, c.project), state
	return cp.Seq
}

// rollback rolls back, unkilled, and checks the files and the state.
func (c *crashEnv) rollback(seq int64) {
	c.t.Helper()
	c.ok("rollback", strconv.FormatInt(seq, 10))
	c.wantAt(seq)
}

// wantAt checks that the files and the session's agent state are those of
// checkpoint seq.
func (c *crashEnv) wantAt(seq int64) {
	c.t.Helper()
	if got := testtree.Read(c.t, c.project); !maps.Equal(got, c.contents[seq]) {
		c.t.Fatalf("files are not those of checkpoint #%d: %d differ", seq, len(wsDiffKeys(got, c.contents[seq]))+len(wsDiffKeys(c.contents[seq], got)))
	}
	if state := c.sessionState(); state != c.states[seq] {
		c.t.Fatalf("agent state = %s, want checkpoint #%d's %s", state, seq, c.states[seq])
	}
}

func (c *crashEnv) rollbacks() []belay.Rollback {
	c.t.Helper()
	return crashJSON[map[string][]belay.Rollback](c, "rollbacks")["items"]
}

// validateClean runs validate and, when it finds problems, checks they are
// ones a kill leaves (lock files of killed git commands, an interrupted
// rollback), repairs them and validates again.
func (c *crashEnv) validateClean(repairIfNeeded bool) {
	c.t.Helper()
	code, out, errOut := c.run("--json", "validate")
	if code == 0 {
		return
	}
	var rep belay.ValidationReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !repairIfNeeded {
		c.t.Fatalf("validate: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, p := range rep.Problems {
		if p.Kind != belay.ProblemWorkspace || !strings.Contains(p.Message, "killed") && !strings.Contains(p.Message, "interrupted") {
			c.t.Fatalf("validate after a kill reports %+v", p)
		}
	}
	rep = crashJSON[belay.ValidationReport](c, "validate", "--repair")
	if !rep.OK {
		c.t.Fatalf("validate --repair = %+v", rep)
	}
	c.ok("validate")
}

// TestCrashKilledSaveAndRollback kills `belay save` and `belay rollback`
// (the real binary, with its git children: the whole process group) at
// random times, round after round. After each kill, either validate
// (reporting only what a kill leaves, then --repair) or simply the next save
// must bring the workspace back: validate clean, a rollback either done and
// recorded whole or not done at all, a killed save's checkpoint (if any)
// holding the files as they were, and saving and rolling back working.
func TestCrashKilledSaveAndRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it many times")
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-crash.seed), %d rounds (-crash.rounds)", seed, *crashRounds)
	home, data := t.TempDir(), t.TempDir()
	c := &crashEnv{t: t, bin: belayBinary(t), project: t.TempDir(), stateDir: t.TempDir(),
		env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C", "BELAY_DATA_DIR=" + data},
		rng: rand.New(rand.NewPCG(seed, 1)), contents: map[int64]map[string]string{}, states: map[int64]string{}}
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("src/d%d/f%03d.txt", i%10, i/10)] = strings.Repeat("original ", 20)
	}
	testtree.Write(t, c.project, files)

	// How long the commands take, to kill them anywhere in their run.
	start := time.Now()
	first := c.save("first")
	c.saveD = time.Since(start)
	c.edit(0)
	c.save("second")
	start = time.Now()
	c.rollback(first)
	c.restD = time.Since(start)
	t.Logf("an uninterrupted save takes %v, a rollback %v", c.saveD.Round(time.Millisecond), c.restD.Round(time.Millisecond))

	for round := 1; round <= *crashRounds; round++ {
		c.edit(round)
		before := testtree.Read(t, c.project)
		beforeState := c.sessionState()
		rbsBefore := len(c.rollbacks())
		isRollback := c.rng.IntN(2) == 0
		var target int64
		var killed bool
		summary := fmt.Sprintf("round %d", round)
		if isRollback {
			seqs := slices.Sorted(maps.Keys(c.contents))
			target = seqs[c.rng.IntN(len(seqs))]
			killed = c.killAfter(time.Duration(c.rng.Int64N(int64(c.restD)*6/5)), "rollback", strconv.FormatInt(target, 10))
		} else {
			file := filepath.Join(c.stateDir, "state.json")
			if err := os.WriteFile(file, []byte(`{"killed":true}`), 0o600); err != nil {
				t.Fatal(err)
			}
			killed = c.killAfter(time.Duration(c.rng.Int64N(int64(c.saveD)*6/5)), "save", "-m", summary, "--state-file", file)
		}

		// Recover: validate (and repair), or just carry on with a save.
		viaValidate := c.rng.IntN(2) == 0
		if viaValidate {
			c.validateClean(true)
		} else {
			c.save(summary + ", after the kill")
			c.validateClean(false)
		}

		// The killed command happened whole or not at all.
		now := testtree.Read(t, c.project)
		rbs := c.rollbacks()
		if isRollback {
			switch {
			case maps.Equal(now, c.contents[target]):
				if len(rbs) != rbsBefore+1 {
					t.Fatalf("round %d: the files were rolled back to #%d but %d rollbacks are recorded, %d before", round, target, len(rbs), rbsBefore)
				}
				// The session moved to the target: its state (the save after
				// the kill replaced it, and descends from the target).
				latest := c.checkpoint(c.lastSeq())
				if viaValidate {
					if state := c.sessionState(); state != c.states[target] {
						t.Fatalf("round %d: the files were rolled back to #%d but the agent state is %s", round, target, state)
					}
				} else if want := c.checkpoint(target); latest.ParentID != want.ID || rbs[len(rbs)-1].TargetID != want.ID {
					t.Fatalf("round %d: the save after the rollback to #%d descends from %s", round, target, latest.ParentID)
				}
			case maps.Equal(now, before):
				if len(rbs) != rbsBefore {
					t.Fatalf("round %d: the files were not rolled back but a rollback was recorded", round)
				}
				if state := c.sessionState(); !viaValidate && state != c.states[c.lastSeq()] || viaValidate && state != beforeState {
					t.Fatalf("round %d: the rollback did not happen but the agent state is %s", round, state)
				}
			default:
				t.Fatalf("round %d: the files are neither as before the rollback nor as at #%d (killed: %v)", round, target, killed)
			}
		} else {
			if !maps.Equal(now, before) {
				t.Fatalf("round %d: a save changed files", round)
			}
			list := crashJSON[belay.CheckpointList](c, "checkpoints", "--limit", "100")
			for _, cp := range list.Items {
				if cp.Summary != summary {
					continue
				}
				diff := crashJSON[belay.DiffResult](c, "diff", strconv.FormatInt(cp.Seq, 10), "--stat")
				if len(diff.Files) != 0 {
					t.Fatalf("round %d: the killed save's checkpoint #%d differs from the files it saved: %+v", round, cp.Seq, diff.Files)
				}
				c.contents[cp.Seq], c.states[cp.Seq] = before, `{"killed":true}`
			}
		}

		// The workspace is usable: a save and a rollback work.
		if viaValidate {
			c.save(summary + ", after the kill")
		}
		seqs := slices.Sorted(maps.Keys(c.contents))
		c.rollback(seqs[c.rng.IntN(len(seqs))])
	}
	c.validateClean(false)
	t.Logf("%d rounds: %d kills before the command finished, %d of them while a git child ran", *crashRounds, c.killedDuringOp, c.killedMidGit)
}

// sessionState is the agent state of the session, compacted.
func (c *crashEnv) sessionState() string {
	c.t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, crashJSON[belay.Session](c, "session-info").State); err != nil {
		c.t.Fatal(err)
	}
	return buf.String()
}

// checkpoint returns checkpoint seq of the session.
func (c *crashEnv) checkpoint(seq int64) belay.Checkpoint {
	c.t.Helper()
	return crashJSON[belay.Checkpoint](c, "show", strconv.FormatInt(seq, 10))
}

// lastSeq is the newest checkpoint whose content is known.
func (c *crashEnv) lastSeq() int64 {
	return slices.Max(slices.Collect(maps.Keys(c.contents)))
}

// TestValidateReportsAndRepairsAStaleGitLock: the lock file of a git command
// killed with belay made every later save fail while validate said "No
// problems left".
func TestValidateReportsAndRepairsAStaleGitLock(t *testing.T) {
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a"})
	c := newWSCLI(t, project)
	c.ok(t, "save", "-m", "first")
	locks, _ := filepath.Glob(filepath.Join(c.data, "workspaces", "*"))
	if len(locks) != 1 {
		t.Fatalf("shadow directories: %v", locks)
	}
	lock := filepath.Join(locks[0], "index.lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := c.run("validate")
	if code != 1 || !strings.Contains(out, "index.lock") || !strings.Contains(out, "belay validate --repair") {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
	out = c.ok(t, "validate", "--repair")
	if !strings.Contains(out, "REPAIRED: workspace "+project) || !strings.Contains(out, "No problems left") {
		t.Errorf("validate --repair printed:\n%s", out)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("the lock is still there: %v", err)
	}
	c.ok(t, "validate")

	// The next save removes one by itself.
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, project, map[string]string{"a.txt": "a2"})
	c.ok(t, "save", "-m", "second")
	c.ok(t, "validate")
}
