package belay

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// TaskStatus is where a task of a plan stands.
type TaskStatus string

// Task statuses.
const (
	TaskPending   TaskStatus = "pending"
	TaskRunning   TaskStatus = "running"
	TaskCompleted TaskStatus = "completed"
	TaskSkipped   TaskStatus = "skipped"
	TaskFailed    TaskStatus = "failed"
)

// Task is one item of a session's plan (seed 002's task state).
type Task struct {
	ID           string     `json:"id"`
	Title        string     `json:"title"`
	Description  string     `json:"description,omitempty"`
	Status       TaskStatus `json:"status"`
	ChangedFiles []string   `json:"changedFiles,omitempty"`
	CommitSHA    string     `json:"commitSha,omitempty"`
	// CostMicros is what the task cost, in millionths of a dollar.
	CostMicros int64 `json:"costMicros"`
	FixCycles  int   `json:"fixCycles"`
	// Reason says why a task failed or was skipped.
	Reason string `json:"reason,omitempty"`
}

// CheckpointMode says when an orchestrator stops for a person (seed 002 §4.2).
type CheckpointMode string

// Checkpoint modes.
const (
	// ModeEveryTask stops after every task.
	ModeEveryTask CheckpointMode = "every_task"
	// ModeEveryN stops after every Every completed tasks.
	ModeEveryN CheckpointMode = "every_n"
	// ModeTriggers stops only on a test failure or the budget.
	ModeTriggers CheckpointMode = "triggers"
)

// Budget limits what a session may spend, in millionths of a dollar.
type Budget struct {
	WarnAtMicros    int64 `json:"warnAtMicros,omitempty"`
	HardLimitMicros int64 `json:"hardLimitMicros,omitempty"`
}

// Plan is a session's tasks, in order, with when to stop for a person.
type Plan struct {
	Tasks  []Task         `json:"tasks"`
	Mode   CheckpointMode `json:"mode,omitempty"`
	Every  int            `json:"every,omitempty"`
	Budget Budget         `json:"budget"`
	// Fired lists the once-only triggers that fired (the budget's).
	Fired []TriggerKind `json:"fired,omitempty"`
	// BudgetHold is the checkpoint made at the hard limit: until it is
	// decided the session takes no more cost.
	BudgetHold string `json:"budgetHold,omitempty"`
}

// Task returns the task with id.
func (p *Plan) Task(id string) (*Task, bool) {
	for i := range p.Tasks {
		if p.Tasks[i].ID == id {
			return &p.Tasks[i], true
		}
	}
	return nil, false
}

// CostMicros sums what the plan's tasks cost.
func (p *Plan) CostMicros() int64 {
	var n int64
	for _, t := range p.Tasks {
		n += t.CostMicros
	}
	return n
}

// TriggerKind is why an orchestrator stops for a person (seed 002 §4.2).
type TriggerKind string

// Checkpoint triggers.
const (
	TriggerScheduled      TriggerKind = "scheduled"
	TriggerTestFailure    TriggerKind = "test-failure"
	TriggerBudgetWarning  TriggerKind = "budget-warning"
	TriggerBudgetCritical TriggerKind = "budget-critical"
	TriggerBudgetExceeded TriggerKind = "budget-exceeded"
)

// ProgressSummary is seed 002's TaskProgressSummary: computed from the plan
// and the session's cost alone, so the same state always gives the same text.
type ProgressSummary struct {
	TasksCompleted int `json:"tasksCompleted"`
	TasksRemaining int `json:"tasksRemaining"`
	TasksSkipped   int `json:"tasksSkipped"`
	TasksFailed    int `json:"tasksFailed"`
	// CumulativeCostMicros is what the session spent; EstimatedRemainingMicros
	// is cost ÷ completed × remaining (0 before the first completed task).
	CumulativeCostMicros     int64    `json:"cumulativeCostMicros"`
	EstimatedRemainingMicros int64    `json:"estimatedRemainingMicros"`
	ChangedFilesSoFar        []string `json:"changedFilesSoFar"`
	FixCyclesSoFar           int      `json:"fixCyclesSoFar"`
	CurrentTaskTitle         string   `json:"currentTaskTitle,omitempty"`
}

// ComputeProgress summarises a plan and a session's cost (seed 002's
// computeProgressSummary). The current task is the running one, else the
// next pending one.
func ComputeProgress(p *Plan, costMicros int64) ProgressSummary {
	s := ProgressSummary{CumulativeCostMicros: costMicros, ChangedFilesSoFar: []string{}}
	seen := map[string]bool{}
	for _, t := range p.Tasks {
		switch t.Status {
		case TaskCompleted:
			s.TasksCompleted++
		case TaskSkipped:
			s.TasksSkipped++
		case TaskFailed:
			s.TasksFailed++
		default:
			s.TasksRemaining++
		}
		s.FixCyclesSoFar += t.FixCycles
		for _, f := range t.ChangedFiles {
			if !seen[f] {
				seen[f] = true
				s.ChangedFilesSoFar = append(s.ChangedFilesSoFar, f)
			}
		}
	}
	if i := slices.IndexFunc(p.Tasks, func(t Task) bool { return t.Status == TaskRunning }); i >= 0 {
		s.CurrentTaskTitle = p.Tasks[i].Title
	} else if i := slices.IndexFunc(p.Tasks, func(t Task) bool { return t.Status == TaskPending }); i >= 0 {
		s.CurrentTaskTitle = p.Tasks[i].Title
	}
	if s.TasksCompleted > 0 {
		s.EstimatedRemainingMicros = int64(math.Round(float64(costMicros) / float64(s.TasksCompleted) * float64(s.TasksRemaining)))
	}
	return s
}

// FormatProgress is seed 002's formatProgressSummary:
// "Checkpoint: 5/20 tasks done | $15.00 spent | ~$33.00 remaining".
func FormatProgress(s ProgressSummary) string {
	total := s.TasksCompleted + s.TasksRemaining + s.TasksSkipped + s.TasksFailed
	out := fmt.Sprintf("Checkpoint: %d/%d tasks done | %s spent | ~%s remaining",
		s.TasksCompleted, total, FormatUSD(s.CumulativeCostMicros), FormatUSD(s.EstimatedRemainingMicros))
	if s.TasksSkipped > 0 {
		out += fmt.Sprintf(" | %d skipped", s.TasksSkipped)
	}
	if s.TasksFailed > 0 {
		out += fmt.Sprintf(" | %d failed", s.TasksFailed)
	}
	return out
}

// FormatUSD writes millionths of a dollar as dollars and cents.
func FormatUSD(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	cents := (micros + 5000) / 10000
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

// ParseUSD reads a dollar amount ("0.42", "$15", "3.000001") as millionths of
// a dollar, exactly: no float drift. Negative, non-finite or over-precise
// amounts are a VALIDATION_ERROR naming field.
func ParseUSD(field, s string) (int64, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || len(frac) > 6 || strings.ContainsAny(whole+frac, "+-eE") {
		return 0, Invalid(field, "%s must be a dollar amount like 0.42 (at most 6 decimals, not negative), got %q", field, Clip(s, 40))
	}
	var n int64
	for _, r := range whole + frac + strings.Repeat("0", 6-len(frac)) {
		if r < '0' || r > '9' || n > (math.MaxInt64-9)/10 {
			return 0, Invalid(field, "%s must be a dollar amount like 0.42 (at most 6 decimals, not negative), got %q", field, Clip(s, 40))
		}
		n = n*10 + int64(r-'0')
	}
	return n, nil
}

// PlanAdjustment is seed 002's subtractive plan revision: drop, skip and
// reorder pending tasks; nothing is added.
type PlanAdjustment struct {
	Dropped []string `json:"droppedTaskIds,omitempty"`
	Skipped []string `json:"skippedTaskIds,omitempty"`
	// Reordered is the new order of the pending tasks that remain; empty keeps it.
	Reordered []string `json:"reorderedTaskIds,omitempty"`
}

// ApplyAdjustment returns the plan with adj applied (seed 002's
// applyPlanAdjustment). Only pending tasks may change; an unknown id, a task
// that is not pending, an id named twice or a reorder that is not exactly the
// remaining pending tasks is a VALIDATION_ERROR naming the id, and p is left
// as it was.
func ApplyAdjustment(p *Plan, adj PlanAdjustment) (*Plan, error) {
	named := map[string]string{}
	check := func(field string, ids []string) error {
		for _, id := range ids {
			t, ok := p.Task(id)
			switch {
			case !ok:
				return Invalid(field, "task %q is not in the plan; an adjustment cannot add tasks", Clip(id, 100)).With("taskId", id)
			case t.Status != TaskPending:
				return Invalid(field, "task %q is %s: only pending tasks may be dropped, skipped or reordered", id, t.Status).With("taskId", id)
			case named[id] != "" && field != "reorderedTaskIds":
				return Invalid(field, "task %q is named twice (in %s and %s)", id, named[id], field).With("taskId", id)
			}
			if field != "reorderedTaskIds" {
				named[id] = field
			}
		}
		return nil
	}
	if err := check("droppedTaskIds", adj.Dropped); err != nil {
		return nil, err
	}
	if err := check("skippedTaskIds", adj.Skipped); err != nil {
		return nil, err
	}
	if err := check("reorderedTaskIds", adj.Reordered); err != nil {
		return nil, err
	}
	out := *p
	out.Tasks = nil
	var pending []Task
	for _, t := range p.Tasks {
		switch {
		case slices.Contains(adj.Dropped, t.ID):
			continue
		case slices.Contains(adj.Skipped, t.ID):
			t.Status, t.Reason = TaskSkipped, "skipped in a plan revision"
		}
		if t.Status == TaskPending {
			pending = append(pending, t)
			continue
		}
		out.Tasks = append(out.Tasks, t)
	}
	if len(adj.Reordered) > 0 {
		if len(adj.Reordered) != len(pending) {
			return nil, Invalid("reorderedTaskIds", "the new order must name each of the %d remaining pending tasks once, got %d", len(pending), len(adj.Reordered))
		}
		byID := map[string]Task{}
		for _, t := range pending {
			byID[t.ID] = t
		}
		reordered := make([]Task, 0, len(pending))
		for _, id := range adj.Reordered {
			t, ok := byID[id]
			if !ok {
				return nil, Invalid("reorderedTaskIds", "task %q is named twice or is dropped or skipped", id).With("taskId", id)
			}
			delete(byID, id)
			reordered = append(reordered, t)
		}
		pending = reordered
	}
	out.Tasks = append(out.Tasks, pending...)
	return &out, nil
}

// Triggers returns the checkpoint triggers that fire after a task ends
// (seed 002 §4.2), given the plan (with the once-only triggers fired so far)
// and the session's cost: every task in ModeEveryTask, every Every completed
// tasks in ModeEveryN, always on a test failure, and once each when the cost
// reaches the budget's warning and 90 % of its hard limit.
func Triggers(p *Plan, costMicros int64, testFailed bool) []TriggerKind {
	var out []TriggerKind
	completed := 0
	for _, t := range p.Tasks {
		if t.Status == TaskCompleted {
			completed++
		}
	}
	switch {
	case testFailed:
		out = append(out, TriggerTestFailure)
	case p.Mode == ModeEveryTask || p.Mode == "":
		out = append(out, TriggerScheduled)
	case p.Mode == ModeEveryN && p.Every > 0 && completed > 0 && completed%p.Every == 0:
		out = append(out, TriggerScheduled)
	}
	b := p.Budget
	if b.WarnAtMicros > 0 && costMicros >= b.WarnAtMicros && !slices.Contains(p.Fired, TriggerBudgetWarning) {
		out = append(out, TriggerBudgetWarning)
	}
	if b.HardLimitMicros > 0 && costMicros*10 >= b.HardLimitMicros*9 && !slices.Contains(p.Fired, TriggerBudgetCritical) {
		out = append(out, TriggerBudgetCritical)
	}
	return out
}

// PriorTask is what the next task's prompt is told of a finished one (seed
// 002 §4.4).
type PriorTask struct {
	Title        string     `json:"title"`
	Status       TaskStatus `json:"status"`
	ChangedFiles []string   `json:"changedFiles"`
	CommitSHA    string     `json:"commitSha,omitempty"`
}

// MaxPriorTasks caps the prior-task context.
const MaxPriorTasks = 5

// PriorContext returns the last MaxPriorTasks finished tasks of the plan,
// oldest first.
func PriorContext(p *Plan) []PriorTask {
	out := []PriorTask{}
	for _, t := range p.Tasks {
		if t.Status == TaskCompleted || t.Status == TaskFailed {
			files := t.ChangedFiles
			if files == nil {
				files = []string{}
			}
			out = append(out, PriorTask{Title: t.Title, Status: t.Status, ChangedFiles: files, CommitSHA: t.CommitSHA})
		}
	}
	return out[max(0, len(out)-MaxPriorTasks):]
}

// Session leases: how long a holder keeps a session without a heartbeat.
const (
	DefaultLease = 30 * time.Second
	MaxLease     = 10 * time.Minute
)

// ValidateLease checks the length of a requested lease: 0 for DefaultLease,
// else 1s to MaxLease.
func ValidateLease(field string, d time.Duration) error {
	if d != 0 && (d < time.Second || d > MaxLease) {
		return Invalid(field, "lease must be between 1s and %s, got %s", MaxLease, d)
	}
	return nil
}
