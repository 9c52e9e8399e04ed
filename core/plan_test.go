package core_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
)

func TestPlanTasksCostTriggersAndAdjustment(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "plan"})
	id := cp.SessionID
	var tasks []belay.Task
	for _, tid := range []string{"t1", "t2", "t3", "t4", "t5"} {
		tasks = append(tasks, belay.Task{ID: tid, Title: "do " + tid})
	}
	_, err := svc.SetPlan(localCtx, belay.SetPlanInput{SessionID: id, Tasks: tasks, Mode: belay.ModeTriggers,
		Budget: belay.Budget{WarnAtMicros: 2_000_000, HardLimitMicros: 4_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	step := func(tid string, st belay.TaskStatus) *belay.ProgressResult {
		t.Helper()
		res, err := svc.UpdateTask(localCtx, belay.TaskUpdate{SessionID: id, TaskID: tid, Status: st, ChangedFiles: []string{tid + ".go"}})
		if err != nil {
			t.Fatalf("task %s %s: %v", tid, st, err)
		}
		return res
	}
	cost := func(usd int64) (*belay.ProgressResult, error) {
		return svc.AddCost(localCtx, belay.CostInput{SessionID: id, Micros: usd * 1_000_000, Model: "m"})
	}
	step("t1", belay.TaskRunning)
	if _, err := cost(1); err != nil {
		t.Fatal(err)
	}
	if res := step("t1", belay.TaskCompleted); res.Checkpoint != nil || res.Summary != "Checkpoint: 1/5 tasks done | $1.00 spent | ~$4.00 remaining" {
		t.Fatalf("after t1: %q, checkpoint %v", res.Summary, res.Checkpoint)
	}
	// A finished task does not change again.
	_, err = svc.UpdateTask(localCtx, belay.TaskUpdate{SessionID: id, TaskID: "t1", Status: belay.TaskFailed})
	testutil.WantCode(t, err, belay.CodeValidation, "status")

	step("t2", belay.TaskRunning)
	res, err := cost(1) // $2: the warning fires once, as a HITL checkpoint
	if err != nil || res.Checkpoint == nil || !slices.Equal(res.Triggers, []belay.TriggerKind{belay.TriggerBudgetWarning}) {
		t.Fatalf("budget warning: %+v, %v", res, err)
	}
	warn := res.Checkpoint
	if !warn.HITLRequired || len(warn.HITL.Options) != 3 || res.Session.Status != belay.SessionAwaitingInput {
		t.Fatalf("warning checkpoint = %+v, session %s", warn.HITL, res.Session.Status)
	}
	// Adjust plan: drop t3, reorder t5 before t4. A bad adjustment refuses the decision.
	bad, _ := json.Marshal(belay.PlanAdjustment{Dropped: []string{"t1"}})
	_, err = svc.Decide(localCtx, belay.DecideInput{CheckpointID: warn.ID, SelectedOption: core.OptionAdjust, Modifications: bad})
	testutil.WantCode(t, err, belay.CodeValidation)
	good, _ := json.Marshal(belay.PlanAdjustment{Dropped: []string{"t3"}, Reordered: []string{"t5", "t4"}})
	dec, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: warn.ID, SelectedOption: core.OptionAdjust, Modifications: good})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tk := range dec.Session.Plan.Tasks {
		order = append(order, tk.ID)
	}
	if !slices.Equal(order, []string{"t1", "t2", "t5", "t4"}) || dec.Session.Status != belay.SessionRunning {
		t.Fatalf("after adjusting: %v, %s", order, dec.Session.Status)
	}
	if res, err := cost(1); err != nil || res.Checkpoint != nil {
		t.Fatalf("$3 is 75%% of the limit, under 90%%: %+v, %v", res, err)
	}
	// The hard limit (past 90 % too) pauses the session for a person; more cost is refused.
	res, err = cost(1)
	if err != nil || res.Checkpoint == nil || !slices.Equal(res.Triggers, []belay.TriggerKind{belay.TriggerBudgetCritical, belay.TriggerBudgetExceeded}) {
		t.Fatalf("hard limit: %+v, %v", res, err)
	}
	_, err = cost(1)
	testutil.WantCode(t, err, belay.CodeBudgetExceeded)
	if _, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: res.Checkpoint.ID, SelectedOption: core.OptionContinue}); err != nil {
		t.Fatal(err)
	}
	if res, err := cost(1); err != nil || res.Session.CostMicros != 5_000_000 || res.Session.Cost != 5 {
		t.Fatalf("after continuing: %+v, %v", res, err)
	}
	ctxt, err := svc.TaskContext(localCtx, id)
	if err != nil || ctxt.Next == nil || ctxt.Next.ID != "t2" || len(ctxt.Prior) != 1 || ctxt.Prior[0].ChangedFiles[0] != "t1.go" {
		t.Fatalf("context = %+v, %v", ctxt, err)
	}
}

func TestPlanInputRules(t *testing.T) {
	svc := newService(t, testclock.New(start, 0))
	cp := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "plan"})
	id := cp.SessionID
	one := []belay.Task{{ID: "a", Title: "A"}}
	for name, tc := range map[string]struct {
		in    belay.SetPlanInput
		field string
	}{
		"no tasks":          {belay.SetPlanInput{SessionID: id}, "tasks"},
		"duplicate id":      {belay.SetPlanInput{SessionID: id, Tasks: []belay.Task{{ID: "a", Title: "A"}, {ID: "a", Title: "B"}}}, "tasks[1].id"},
		"no title":          {belay.SetPlanInput{SessionID: id, Tasks: []belay.Task{{ID: "a"}}}, "tasks[0].title"},
		"bad mode":          {belay.SetPlanInput{SessionID: id, Tasks: one, Mode: "sometimes"}, "mode"},
		"every_n needs n":   {belay.SetPlanInput{SessionID: id, Tasks: one, Mode: belay.ModeEveryN}, "every"},
		"negative every":    {belay.SetPlanInput{SessionID: id, Tasks: one, Every: -5}, "every"},
		"every, no every_n": {belay.SetPlanInput{SessionID: id, Tasks: one, Mode: belay.ModeTriggers, Every: 2}, "every"},
		"negative budget":   {belay.SetPlanInput{SessionID: id, Tasks: one, Budget: belay.Budget{WarnAtMicros: -1}}, "budget"},
		"warn above limit":  {belay.SetPlanInput{SessionID: id, Tasks: one, Budget: belay.Budget{WarnAtMicros: 5, HardLimitMicros: 4}}, "budget.warnAtMicros"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := svc.SetPlan(localCtx, tc.in)
			testutil.WantCode(t, err, belay.CodeValidation, tc.field)
		})
	}
	// Amounts below a cent are told as they are, not rounded to the same $0.00.
	_, err := svc.SetPlan(localCtx, belay.SetPlanInput{SessionID: id, Tasks: one, Budget: belay.Budget{WarnAtMicros: 500, HardLimitMicros: 100}})
	if be := (*belay.Error)(nil); !errors.As(err, &be) || !strings.Contains(be.Message, "($0.0005)") || !strings.Contains(be.Message, "($0.0001)") {
		t.Errorf("warning above the limit, under a cent: %v", err)
	}
	_, err = svc.AddCost(localCtx, belay.CostInput{SessionID: id, Micros: 1})
	testutil.WantCode(t, err, belay.CodeValidation, "sessionId")
	if _, err := svc.SetPlan(localCtx, belay.SetPlanInput{SessionID: id, Tasks: one}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.AddCost(localCtx, belay.CostInput{SessionID: id, Micros: -1})
	testutil.WantCode(t, err, belay.CodeValidation, "micros")
	_, err = svc.UpdateTask(localCtx, belay.TaskUpdate{SessionID: id, TaskID: "nope", Status: belay.TaskRunning})
	testutil.WantCode(t, err, belay.CodeValidation, "taskId")
	_, err = svc.AdjustPlan(localCtx, id, belay.PlanAdjustment{Skipped: []string{"new"}})
	testutil.WantCode(t, err, belay.CodeValidation, "skippedTaskIds")
}
