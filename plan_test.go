package belay_test

import (
	"slices"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
)

func tasks(statuses ...belay.TaskStatus) *belay.Plan {
	p := &belay.Plan{}
	for i, st := range statuses {
		p.Tasks = append(p.Tasks, belay.Task{ID: string(rune('a' + i)), Title: "task " + string(rune('a'+i)), Status: st})
	}
	return p
}

func TestComputeProgress(t *testing.T) {
	p := tasks(belay.TaskCompleted, belay.TaskCompleted, belay.TaskSkipped, belay.TaskRunning, belay.TaskPending, belay.TaskPending)
	p.Tasks[0].ChangedFiles = []string{"a.go", "b.go"}
	p.Tasks[1].ChangedFiles = []string{"b.go", "c.go"}
	p.Tasks[1].FixCycles = 2
	s := belay.ComputeProgress(p, 15_000_000)
	if s.TasksCompleted != 2 || s.TasksRemaining != 3 || s.TasksSkipped != 1 || s.FixCyclesSoFar != 2 ||
		!slices.Equal(s.ChangedFilesSoFar, []string{"a.go", "b.go", "c.go"}) || s.CurrentTaskTitle != "task d" {
		t.Fatalf("summary = %+v", s)
	}
	// $15 for 2 tasks, 3 to go: ~$22.50.
	if s.EstimatedRemainingMicros != 22_500_000 {
		t.Errorf("estimated remaining = %d, want 22500000", s.EstimatedRemainingMicros)
	}
	if got, want := belay.FormatProgress(s), "Checkpoint: 2/6 tasks done | $15.00 spent | ~$22.50 remaining | 1 skipped"; got != want {
		t.Errorf("FormatProgress = %q, want %q", got, want)
	}
	// Deterministic, and no estimate before anything completed.
	if s2 := belay.ComputeProgress(p, 15_000_000); belay.FormatProgress(s2) != belay.FormatProgress(s) {
		t.Error("the same state gave two summaries")
	}
	if e := belay.ComputeProgress(tasks(belay.TaskPending), 1_000_000).EstimatedRemainingMicros; e != 0 {
		t.Errorf("estimate before the first completed task = %d", e)
	}
	// Seed 002's example: 5 of 20 done for $15 → ~$45 for the 15 left.
	big := tasks()
	for i := range 20 {
		st := belay.TaskPending
		if i < 5 {
			st = belay.TaskCompleted
		}
		big.Tasks = append(big.Tasks, belay.Task{ID: string(rune('A' + i)), Status: st})
	}
	if got := belay.FormatProgress(belay.ComputeProgress(big, 15_000_000)); got != "Checkpoint: 5/20 tasks done | $15.00 spent | ~$45.00 remaining" {
		t.Errorf("seed example = %q", got)
	}
}

func TestParseUSD(t *testing.T) {
	for in, want := range map[string]int64{"0.42": 420_000, "$15": 15_000_000, "3.000001": 3_000_001, ".5": 500_000, "0": 0} {
		if got, err := belay.ParseUSD("cost", in); err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1e3", "NaN", "Inf", "0.0000001", "1.2.3", "abc", "+1", "99999999999999999999"} {
		_, err := belay.ParseUSD("cost", bad)
		testutil.WantCode(t, err, belay.CodeValidation, "cost")
	}
	// Exact: ten cents added ten times is a dollar.
	var sum int64
	for range 10 {
		n, _ := belay.ParseUSD("cost", "0.1")
		sum += n
	}
	if belay.FormatUSD(sum) != "$1.00" || sum != 1_000_000 {
		t.Errorf("10 × $0.10 = %d (%s)", sum, belay.FormatUSD(sum))
	}
}

func TestTriggers(t *testing.T) {
	p := tasks(belay.TaskCompleted, belay.TaskPending)
	p.Mode = belay.ModeTriggers
	p.Budget = belay.Budget{WarnAtMicros: 10_000_000, HardLimitMicros: 20_000_000}
	if got := belay.Triggers(p, 9_999_999, false); len(got) != 0 {
		t.Errorf("under the warning: %v", got)
	}
	if got := belay.Triggers(p, 10_000_000, false); !slices.Equal(got, []belay.TriggerKind{belay.TriggerBudgetWarning}) {
		t.Errorf("at warnAt: %v", got)
	}
	p.Fired = []belay.TriggerKind{belay.TriggerBudgetWarning}
	if got := belay.Triggers(p, 12_000_000, false); len(got) != 0 {
		t.Errorf("the warning fires once: %v", got)
	}
	if got := belay.Triggers(p, 18_000_000, false); !slices.Equal(got, []belay.TriggerKind{belay.TriggerBudgetCritical}) {
		t.Errorf("at 90%% of the hard limit: %v", got)
	}
	if got := belay.Triggers(p, 0, true); !slices.Equal(got, []belay.TriggerKind{belay.TriggerTestFailure}) {
		t.Errorf("a test failure forces one: %v", got)
	}
	p.Mode = belay.ModeEveryTask
	if got := belay.Triggers(p, 0, false); !slices.Equal(got, []belay.TriggerKind{belay.TriggerScheduled}) {
		t.Errorf("every task: %v", got)
	}
	p.Mode, p.Every = belay.ModeEveryN, 2
	if got := belay.Triggers(p, 0, false); len(got) != 0 {
		t.Errorf("every 2 after 1: %v", got)
	}
	p.Tasks[1].Status = belay.TaskCompleted
	if got := belay.Triggers(p, 0, false); !slices.Equal(got, []belay.TriggerKind{belay.TriggerScheduled}) {
		t.Errorf("every 2 after 2: %v", got)
	}
}

func TestApplyAdjustment(t *testing.T) {
	p := tasks(belay.TaskCompleted, belay.TaskPending, belay.TaskPending, belay.TaskPending, belay.TaskPending)
	got, err := belay.ApplyAdjustment(p, belay.PlanAdjustment{Dropped: []string{"b"}, Skipped: []string{"c"}, Reordered: []string{"e", "d"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range got.Tasks {
		ids = append(ids, tk.ID+":"+string(tk.Status))
	}
	if want := []string{"a:completed", "c:skipped", "e:pending", "d:pending"}; !slices.Equal(ids, want) {
		t.Errorf("tasks = %v, want %v", ids, want)
	}
	if len(p.Tasks) != 5 || p.Tasks[2].Status != belay.TaskPending {
		t.Error("the input plan changed")
	}
	for name, adj := range map[string]belay.PlanAdjustment{
		"drop a completed task":  {Dropped: []string{"a"}},
		"unknown id":             {Skipped: []string{"z"}},
		"named twice":            {Dropped: []string{"b"}, Skipped: []string{"b"}},
		"reorder misses a task":  {Reordered: []string{"b", "c"}},
		"reorder a dropped task": {Dropped: []string{"b"}, Reordered: []string{"b", "c", "d", "e"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := belay.ApplyAdjustment(p, adj)
			testutil.WantCode(t, err, belay.CodeValidation)
		})
	}
}

func TestPriorContextKeepsTheLastFive(t *testing.T) {
	p := tasks(belay.TaskCompleted, belay.TaskCompleted, belay.TaskFailed, belay.TaskCompleted, belay.TaskCompleted,
		belay.TaskCompleted, belay.TaskSkipped, belay.TaskPending)
	got := belay.PriorContext(p)
	if len(got) != 5 || got[0].Title != "task b" || got[4].Title != "task f" || got[1].Status != belay.TaskFailed {
		t.Errorf("prior = %+v", got)
	}
}
