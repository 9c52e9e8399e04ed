package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// The orchestrator (seed 002): a session's plan of tasks, its exact cost, the
// progress summary after every task, and the checkpoints its triggers make —
// HITL requests offering Continue, Adjust plan and Abort.

// Limits of a plan.
const (
	MaxTasks     = 1000
	maxTaskTitle = 500
	maxTaskDesc  = 10000
	// maxCostMicros bounds one cost record: a million dollars.
	maxCostMicros = 1_000_000 * 1_000_000
)

// Options of a trigger checkpoint.
const (
	OptionContinue = "continue"
	OptionAdjust   = "adjust"
	OptionAbort    = "abort"
)

// MetadataTrigger is the metadata key that marks a checkpoint made by a plan trigger.
const MetadataTrigger = "planTriggers"

var triggerOptions = []belay.HITLOption{
	{ID: OptionContinue, Label: "Continue", Action: belay.ActionApprove, IsDefault: true},
	{ID: OptionAdjust, Label: "Adjust plan", Description: "drop, skip or reorder pending tasks (modifications: droppedTaskIds, skippedTaskIds, reorderedTaskIds)",
		Action: belay.ActionModify},
	{ID: OptionAbort, Label: "Abort", Description: "stop the session: it fails", Action: belay.ActionReject},
}

// planSession returns a session the caller may write to, with a plan.
func planSession(ctx context.Context, tx store.Tx, c caller, id string) (*belay.Session, error) {
	sess, err := writeSession(ctx, tx, c, id)
	if err != nil {
		return nil, err
	}
	if err := checkOpen(sess); err != nil {
		return nil, err
	}
	if sess.Plan == nil {
		return nil, belay.Invalid("sessionId", "session %s has no plan; set one first", sess.ID).With("sessionId", sess.ID)
	}
	return sess, nil
}

// SetPlan gives a session its tasks and its checkpoint rules. Tasks keep the
// given order; their status starts pending. A session that has a plan with
// finished tasks keeps those: only a session without work done may be
// replanned.
func (s *Service) SetPlan(ctx context.Context, in belay.SetPlanInput) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	plan, err := validPlan(in)
	if err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		if sess, err = writeSession(ctx, tx, c, in.SessionID); err != nil {
			return err
		}
		if err := checkOpen(sess); err != nil {
			return err
		}
		if sess.Plan != nil && slices.ContainsFunc(sess.Plan.Tasks, func(t belay.Task) bool { return t.Status != belay.TaskPending }) {
			return belay.Errorf(belay.CodeConflict, "session %s has started its plan; adjust it instead of replacing it", sess.ID).
				With("sessionId", sess.ID)
		}
		sess.Plan, sess.UpdatedAt = plan, s.clock.Now()
		if err := s.appendEvent(ctx, tx, belay.EventPlanUpdated, sess.ID, "", map[string]any{"tasks": len(plan.Tasks), "mode": plan.Mode}); err != nil {
			return err
		}
		return tx.UpdateSession(ctx, sess)
	})
	return sess, err
}

func validPlan(in belay.SetPlanInput) (*belay.Plan, error) {
	if len(in.Tasks) == 0 || len(in.Tasks) > MaxTasks {
		return nil, belay.Invalid("tasks", "a plan has 1-%d tasks, got %d", MaxTasks, len(in.Tasks))
	}
	p := &belay.Plan{Mode: in.Mode, Every: in.Every, Budget: in.Budget, Tasks: make([]belay.Task, len(in.Tasks))}
	seen := map[string]bool{}
	for i, t := range in.Tasks {
		field := fmt.Sprintf("tasks[%d]", i)
		if t.ID == "" || len(t.ID) > belay.MaxNameLen || strings.ContainsAny(t.ID, " \t\r\n") {
			return nil, belay.Invalid(field+".id", "task ids are 1-%d characters without spaces", belay.MaxNameLen)
		}
		if seen[t.ID] {
			return nil, belay.Invalid(field+".id", "task id %q is used twice", t.ID).With("taskId", t.ID)
		}
		seen[t.ID] = true
		if t.Title == "" || len(t.Title) > maxTaskTitle {
			return nil, belay.Invalid(field+".title", "a task title is 1-%d bytes", maxTaskTitle)
		}
		if len(t.Description) > maxTaskDesc {
			return nil, belay.Invalid(field+".description", "a task description is at most %d bytes", maxTaskDesc)
		}
		p.Tasks[i] = belay.Task{ID: t.ID, Title: t.Title, Description: t.Description, Status: belay.TaskPending}
	}
	switch p.Mode {
	case "":
		p.Mode = belay.ModeEveryTask
	case belay.ModeEveryTask, belay.ModeTriggers:
	case belay.ModeEveryN:
		if p.Every < 1 {
			return nil, belay.Invalid("every", "mode every_n needs every ≥ 1")
		}
	default:
		return nil, belay.Invalid("mode", "mode is every_task, every_n or triggers, got %q", belay.Clip(string(p.Mode), 40))
	}
	if p.Mode != belay.ModeEveryN && p.Every != 0 {
		return nil, belay.Invalid("every", "every is for mode every_n, not %s; got %d", p.Mode, p.Every)
	}
	b := p.Budget
	if b.WarnAtMicros < 0 || b.HardLimitMicros < 0 {
		return nil, belay.Invalid("budget", "budget amounts must not be negative")
	}
	if b.HardLimitMicros > 0 && b.WarnAtMicros > b.HardLimitMicros {
		return nil, belay.Invalid("budget.warnAtMicros", "the warning (%s) must not be above the hard limit (%s)",
			exactUSD(b.WarnAtMicros), exactUSD(b.HardLimitMicros))
	}
	return p, nil
}

// exactUSD writes a non-negative amount in millionths of a dollar as dollars
// with every digit it has, at least cents: $0.0005, $1.50.
func exactUSD(micros int64) string {
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("$%d.%s", micros/1_000_000, frac)
}

// UpdateTask moves a task on: pending → running; pending or running →
// completed, failed or skipped. A finished task does not change again. When
// a task finishes, the progress summary is appended as an event and the
// triggers due make one HITL checkpoint.
func (s *Service) UpdateTask(ctx context.Context, in belay.TaskUpdate) (*belay.ProgressResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	switch in.Status {
	case belay.TaskRunning, belay.TaskCompleted, belay.TaskFailed, belay.TaskSkipped:
	default:
		return nil, belay.Invalid("status", "a task moves to running, completed, failed or skipped, not %q", belay.Clip(string(in.Status), 40))
	}
	if in.FixCycles < 0 || len(in.ChangedFiles) > 10000 || len(in.CommitSHA) > 64 || len(in.Reason) > maxReason {
		return nil, belay.Invalid("taskId", "fixCycles must not be negative; at most 10000 changed files, a 64-character sha and a %d-byte reason", maxReason)
	}
	var res *belay.ProgressResult
	err = s.update(ctx, func(tx store.Tx) error {
		sess, err := planSession(ctx, tx, c, in.SessionID)
		if err != nil {
			return err
		}
		t, ok := sess.Plan.Task(in.TaskID)
		if !ok {
			return belay.Invalid("taskId", "task %q is not in the plan", belay.Clip(in.TaskID, 100)).With("taskId", in.TaskID)
		}
		if t.Status != belay.TaskPending && (t.Status != belay.TaskRunning || in.Status == belay.TaskRunning) {
			return belay.Invalid("status", "task %q is %s and cannot become %s", t.ID, t.Status, in.Status).With("taskId", t.ID)
		}
		t.Status, t.Reason = in.Status, in.Reason
		if in.ChangedFiles != nil {
			t.ChangedFiles = in.ChangedFiles
		}
		if in.CommitSHA != "" {
			t.CommitSHA = in.CommitSHA
		}
		t.FixCycles += in.FixCycles
		now := s.clock.Now()
		sess.UpdatedAt = now
		var triggers []belay.TriggerKind
		if in.Status != belay.TaskRunning {
			triggers = belay.Triggers(sess.Plan, sess.CostMicros, in.TestFailed)
		}
		res, err = s.progressed(ctx, tx, c, sess, "task "+t.ID+" "+string(t.Status), triggers)
		return err
	})
	return res, err
}

// progressed appends the progress event, makes the checkpoint the triggers
// ask for (marking once-only ones fired), and stores the session.
func (s *Service) progressed(ctx context.Context, tx store.Tx, c caller, sess *belay.Session, what string,
	triggers []belay.TriggerKind) (*belay.ProgressResult, error) {
	sum := belay.ComputeProgress(sess.Plan, sess.CostMicros)
	res := &belay.ProgressResult{Session: sess, Progress: sum, Summary: belay.FormatProgress(sum), Triggers: triggers}
	if err := s.appendEvent(ctx, tx, belay.EventPlanProgress, sess.ID, "", map[string]any{
		"what": what, "progress": sum, "summary": res.Summary, "triggers": triggers}); err != nil {
		return nil, err
	}
	for _, t := range triggers {
		if t == belay.TriggerBudgetWarning || t == belay.TriggerBudgetCritical || t == belay.TriggerBudgetExceeded {
			sess.Plan.Fired = append(sess.Plan.Fired, t)
		}
	}
	if len(triggers) > 0 {
		cp, err := s.triggerCheckpoint(ctx, tx, c, sess, triggers, res.Summary)
		if err != nil {
			return nil, err
		}
		res.Checkpoint = cp
		if !slices.Contains(triggers, belay.TriggerBudgetExceeded) {
			return res, nil // insertCheckpoint stored the session
		}
		sess.Plan.BudgetHold = cp.ID
	}
	return res, tx.UpdateSession(ctx, sess)
}

// triggerCheckpoint makes the HITL checkpoint a trigger asks for (seed 002's
// presentCheckpoint): Continue, Adjust plan, Abort, with the triggers and the
// summary as its context.
func (s *Service) triggerCheckpoint(ctx context.Context, tx store.Tx, c caller, sess *belay.Session,
	triggers []belay.TriggerKind, summary string) (*belay.Checkpoint, error) {
	names := make([]string, len(triggers))
	for i, t := range triggers {
		names[i] = string(t)
	}
	hctx, err := json.Marshal(map[string]any{"triggers": names, "summary": summary})
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(map[string]any{MetadataTrigger: names})
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	trigger := belay.TriggerUserRequest
	if slices.ContainsFunc(triggers, func(t belay.TriggerKind) bool { return strings.HasPrefix(string(t), "budget") }) {
		trigger = belay.TriggerCostThreshold
	} else if slices.Contains(triggers, belay.TriggerTestFailure) {
		trigger = belay.TriggerValidationFail
	}
	cp := &belay.Checkpoint{
		ID: newID(), Name: "checkpoint-" + names[0], Type: belay.TypeHITL, Trigger: trigger,
		Summary: belay.Clip(summary, belay.MaxSummary), AgentState: sess.State, Metadata: meta,
		CreatedBy: c.UserID, CreatedAt: now, Phase: sess.Phase, Step: sess.CurrentStep, HITLRequired: true,
	}
	cp.HITL = buildHITL(&belay.HITLInput{Required: true, Title: "Checkpoint: " + strings.Join(names, ", "),
		Message: summary, Options: triggerOptions, Context: hctx}, cp, now)
	if err := s.insertCheckpoint(ctx, tx, sess, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// AddCost records spending on the session and its task, in millionths of a
// dollar, exactly. Reaching a budget threshold makes a trigger checkpoint;
// reaching the hard limit pauses the session for a person: further cost is
// BUDGET_EXCEEDED until that request is decided.
func (s *Service) AddCost(ctx context.Context, in belay.CostInput) (*belay.ProgressResult, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", in.SessionID); err != nil {
		return nil, err
	}
	if in.Micros < 0 || in.Micros > maxCostMicros {
		return nil, belay.Invalid("micros", "a cost is 0 to %s, got %d millionths of a dollar", belay.FormatUSD(maxCostMicros), in.Micros)
	}
	if in.TokensIn < 0 || in.TokensOut < 0 || len(in.Model) > belay.MaxNameLen {
		return nil, belay.Invalid("tokensIn", "token counts must not be negative and the model name at most %d characters", belay.MaxNameLen)
	}
	var res *belay.ProgressResult
	err = s.update(ctx, func(tx store.Tx) error {
		sess, err := planSession(ctx, tx, c, in.SessionID)
		if err != nil {
			return err
		}
		if err := budgetHold(ctx, tx, sess); err != nil {
			return err
		}
		var t *belay.Task
		if in.TaskID != "" {
			var ok bool
			if t, ok = sess.Plan.Task(in.TaskID); !ok {
				return belay.Invalid("taskId", "task %q is not in the plan", belay.Clip(in.TaskID, 100)).With("taskId", in.TaskID)
			}
		} else if i := slices.IndexFunc(sess.Plan.Tasks, func(t belay.Task) bool { return t.Status == belay.TaskRunning }); i >= 0 {
			t = &sess.Plan.Tasks[i]
		}
		if t != nil {
			t.CostMicros += in.Micros
		}
		sess.CostMicros += in.Micros
		sess.Cost = float64(sess.CostMicros) / 1e6
		sess.UpdatedAt = s.clock.Now()
		if err := s.appendEvent(ctx, tx, belay.EventCostAdded, sess.ID, "", map[string]any{"micros": in.Micros,
			"tokensIn": in.TokensIn, "tokensOut": in.TokensOut, "model": in.Model, "totalMicros": sess.CostMicros}); err != nil {
			return err
		}
		var triggers []belay.TriggerKind
		for _, tr := range belay.Triggers(sess.Plan, sess.CostMicros, false) {
			if tr == belay.TriggerBudgetWarning || tr == belay.TriggerBudgetCritical {
				triggers = append(triggers, tr)
			}
		}
		if b := sess.Plan.Budget.HardLimitMicros; b > 0 && sess.CostMicros >= b && !slices.Contains(sess.Plan.Fired, belay.TriggerBudgetExceeded) {
			triggers = append(triggers, belay.TriggerBudgetExceeded)
		}
		res, err = s.progressed(ctx, tx, c, sess, "cost", triggers)
		return err
	})
	return res, err
}

// budgetHold refuses cost while the request made at the hard limit waits.
func budgetHold(ctx context.Context, tx store.Tx, sess *belay.Session) error {
	if sess.Plan.BudgetHold == "" {
		return nil
	}
	cp, err := tx.GetCheckpoint(ctx, sess.Plan.BudgetHold)
	if belay.IsCode(err, belay.CodeCheckpointNotFound) || err == nil && !cp.Pending() {
		sess.Plan.BudgetHold = ""
		return nil
	}
	if err != nil {
		return err
	}
	return belay.Errorf(belay.CodeBudgetExceeded, "session %s reached its hard limit of %s and is paused: decide checkpoint #%d first",
		sess.ID, belay.FormatUSD(sess.Plan.Budget.HardLimitMicros), cp.Seq).With("sessionId", sess.ID).With("checkpointId", cp.ID)
}

// AdjustPlan drops, skips and reorders pending tasks of a session's plan.
func (s *Service) AdjustPlan(ctx context.Context, sessionID string, adj belay.PlanAdjustment) (*belay.Session, error) {
	c, err := authorize(ctx, belay.ScopeWrite)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	var sess *belay.Session
	err = s.update(ctx, func(tx store.Tx) error {
		if sess, err = planSession(ctx, tx, c, sessionID); err != nil {
			return err
		}
		return s.adjust(ctx, tx, sess, adj)
	})
	return sess, err
}

// adjust applies adj to sess's plan and stores it with an event.
func (s *Service) adjust(ctx context.Context, tx store.Tx, sess *belay.Session, adj belay.PlanAdjustment) error {
	p, err := belay.ApplyAdjustment(sess.Plan, adj)
	if err != nil {
		return err
	}
	sess.Plan, sess.UpdatedAt = p, s.clock.Now()
	if err := s.appendEvent(ctx, tx, belay.EventPlanUpdated, sess.ID, "", map[string]any{"adjustment": adj, "tasks": len(p.Tasks)}); err != nil {
		return err
	}
	return tx.UpdateSession(ctx, sess)
}

// adjustOnDecision applies the plan adjustment a modify decision on a
// trigger checkpoint carries as its modifications.
func (s *Service) adjustOnDecision(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint, d *belay.Decision) error {
	if d.Action != belay.ActionModify || len(d.Modifications) == 0 || sess.Plan == nil || !isTriggerCheckpoint(cp) {
		return nil
	}
	var adj belay.PlanAdjustment
	dec := json.NewDecoder(strings.NewReader(string(d.Modifications)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&adj); err != nil {
		return belay.Invalid("modifications", "modifications of an Adjust plan decision are droppedTaskIds, skippedTaskIds and reorderedTaskIds: %v", err)
	}
	p, err := belay.ApplyAdjustment(sess.Plan, adj)
	if err != nil {
		return err
	}
	sess.Plan = p
	return s.appendEvent(ctx, tx, belay.EventPlanUpdated, sess.ID, cp.ID, map[string]any{"adjustment": adj, "tasks": len(p.Tasks)})
}

func isTriggerCheckpoint(cp *belay.Checkpoint) bool {
	var m map[string]json.RawMessage
	return cp.Metadata != nil && json.Unmarshal(cp.Metadata, &m) == nil && m[MetadataTrigger] != nil
}

// TaskContext returns seed 002's prior-task context for a session's next task.
func (s *Service) TaskContext(ctx context.Context, sessionID string) (*belay.TaskContext, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("sessionId", sessionID); err != nil {
		return nil, err
	}
	sess, _, err := readSession(ctx, s.store, c, sessionID)
	if err != nil {
		return nil, err
	}
	if sess.Plan == nil {
		return nil, belay.Invalid("sessionId", "session %s has no plan", sess.ID).With("sessionId", sess.ID)
	}
	out := &belay.TaskContext{Next: nextTask(sess.Plan), Prior: belay.PriorContext(sess.Plan)}
	var b strings.Builder
	if len(out.Prior) > 0 {
		b.WriteString("Prior tasks:\n")
		for _, t := range out.Prior {
			fmt.Fprintf(&b, "- %s (%s)", t.Title, t.Status)
			if t.CommitSHA != "" {
				fmt.Fprintf(&b, " commit %s", t.CommitSHA)
			}
			if len(t.ChangedFiles) > 0 {
				fmt.Fprintf(&b, "; changed: %s", strings.Join(t.ChangedFiles, ", "))
			}
			b.WriteString("\n")
		}
	}
	if out.Next != nil {
		fmt.Fprintf(&b, "Next task: %s", out.Next.Title)
		if out.Next.Description != "" {
			fmt.Fprintf(&b, "\n%s", out.Next.Description)
		}
		b.WriteString("\n")
	}
	out.Prompt = b.String()
	return out, nil
}
