package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/pace"
	"github.com/belayhq/belay/store"
)

// SystemUser is the decider of automatic (timeout) decisions.
const SystemUser = "system"

// defaultOptions are offered when a HITL request names none: approve and
// reject, the default the one a timeout decides (approve unless it rejects).
func defaultOptions(t *belay.TimeoutInput) []belay.HITLOption {
	rejects := t != nil && t.DefaultAction == belay.ActionReject
	return []belay.HITLOption{
		{ID: "approve", Label: "Approve", Action: belay.ActionApprove, IsDefault: !rejects},
		{ID: "reject", Label: "Reject", Action: belay.ActionReject, IsDefault: rejects},
	}
}

// buildHITL turns a validated request into the stored HITL configuration.
func buildHITL(in *belay.HITLInput, cp *belay.Checkpoint, now time.Time) *belay.HITLRequest {
	h := &belay.HITLRequest{
		Title: in.Title, Message: in.Message, Options: in.Options, Context: compactJSON(in.Context),
		Approvers: in.Approvers, ForbidSelfApproval: in.ForbidSelfApproval, OnReject: in.OnReject,
	}
	if h.Title == "" {
		h.Title = cp.Summary
	}
	if len(h.Options) == 0 {
		h.Options = defaultOptions(in.Timeout)
	}
	if h.OnReject == "" {
		h.OnReject = belay.OnRejectFail
	}
	if t := in.Timeout; t != nil {
		h.Timeout = &belay.HITLTimeout{Duration: t.Duration, DefaultAction: t.DefaultAction,
			ExpiresAt: now.Add(time.Duration(t.Duration) * time.Second)}
	}
	return h
}

func hitlEventData(cp *belay.Checkpoint) map[string]any {
	d := withApprovers(cp, map[string]any{"checkpointId": cp.ID, "title": cp.HITL.Title, "message": cp.HITL.Message, "options": cp.HITL.Options})
	if cp.HITL.Timeout != nil {
		d["expiresAt"] = cp.HITL.Timeout.ExpiresAt
		d["defaultAction"] = cp.HITL.Timeout.DefaultAction
	}
	if cp.ExpiresAt != nil {
		d["checkpointExpiresAt"] = cp.ExpiresAt
	}
	if next, ok := nextDeadline(cp); ok {
		d["deadline"] = next
	}
	return d
}

// withApprovers adds the request's approvers to the data of one of its
// events: they are told of it (store.EventQuery.Approvals) though they may
// not read the session.
func withApprovers(cp *belay.Checkpoint, d map[string]any) map[string]any {
	if len(cp.HITL.Approvers) > 0 {
		d["approvers"] = cp.HITL.Approvers
	}
	return d
}

// Decide records a human decision. Exactly one decision ever wins: the rest get
// HITL_ALREADY_DECIDED, except a retry with the same idempotency key, which gets
// the decision it made. Who may not decide learns nothing of the decision.
func (s *Service) Decide(ctx context.Context, in belay.DecideInput) (*belay.DecideResult, error) {
	c, err := authorize(ctx, belay.ScopeDecide)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	for {
		// A timeout that is due is applied first, in its own transaction, so
		// it is kept even when this decision then fails.
		if err := s.settleDue(ctx, in.CheckpointID); err != nil {
			return nil, err
		}
		res, timedOut, err := s.decideOnce(ctx, c, in)
		switch {
		case errors.Is(err, errDecidedMeanwhile):
			// Another instance's transaction decided after this one read the
			// request (PostgreSQL's read committed): read it again, so that a
			// retry with the same idempotency key gets the decision it made.
		case !timedOut:
			return res, err
		}
		// Or a deadline passed since settleDue looked, and was applied: now
		// the request is decided by it (HITL_ALREADY_DECIDED, or
		// CHECKPOINT_EXPIRED at the expiry) or paused and still open for
		// this decision.
	}
}

// errDecidedMeanwhile is recordDecision's error when another transaction
// decided the request after this one read it undecided. It wraps
// HITL_ALREADY_DECIDED.
var errDecidedMeanwhile = errors.New("decided meanwhile")

// decideOnce is one attempt of Decide in one transaction. It reports
// timedOut, having applied and kept what fell due, when one of the request's
// deadlines passed since settleDue looked.
func (s *Service) decideOnce(ctx context.Context, c caller, in belay.DecideInput) (*belay.DecideResult, bool, error) {
	var res belay.DecideResult
	timedOut := false
	err := s.update(ctx, func(tx store.Tx) error {
		cp, sess, rt, err := readCheckpoint(ctx, tx, c, in.CheckpointID)
		if err != nil {
			return err
		}
		if err := cp.VerifyChecksum(); err != nil {
			return err
		}
		if !cp.HITLRequired {
			return belay.Errorf(belay.CodeHITLNotRequired, "checkpoint %s does not ask for a decision", cp.ID).With("checkpointId", cp.ID)
		}
		if err := mayDecide(c, rt, cp); err != nil {
			return err
		}
		now := s.clock.Now()
		if due(cp, now) {
			timedOut = true
			return s.applyDue(ctx, tx, cp)
		}
		if err := pastExpiry(cp, now); err != nil && !retried(cp, c, in) {
			return err
		}
		if d := cp.Decision; d != nil {
			if retried(cp, c, in) {
				if !retries(cp, d, in) {
					return belay.Errorf(belay.CodeHITLAlreadyDecided, "checkpoint %s was already decided under idempotency key %q (%s by %s), and this request asks for another decision",
						cp.ID, belay.Clip(in.IdempotencyKey, 100), d.Action, d.UserID).With("checkpointId", cp.ID).With("decision", d)
				}
				res = belay.DecideResult{Checkpoint: cp, Session: shownSession(sess, rt), Decision: d}
				return nil
			}
			return belay.Errorf(belay.CodeHITLAlreadyDecided, "checkpoint %s was already decided: %s by %s", cp.ID, d.Action, d.UserID).
				With("checkpointId", cp.ID).With("decision", d)
		}
		d, err := s.decideOpen(ctx, tx, c, sess, cp, in, now)
		if err != nil {
			return err
		}
		res = belay.DecideResult{Checkpoint: cp, Session: shownSession(sess, rt), Decision: d}
		return nil
	})
	if err != nil || timedOut {
		return nil, timedOut, err
	}
	return &res, false, nil
}

// retries reports whether in asks for decision d of cp again: the same
// option, feedback and modifications. A request under d's idempotency key
// that asks for anything else is no retry, and gets HITL_ALREADY_DECIDED
// rather than d, which its caller would take for its own.
func retries(cp *belay.Checkpoint, d *belay.Decision, in belay.DecideInput) bool {
	opt, err := ChooseOption(cp.HITL, in.SelectedOption, in.Action)
	return err == nil && opt.ID == d.SelectedOption && in.Feedback == d.Feedback &&
		bytes.Equal(compactJSON(in.Modifications), d.Modifications)
}

// instant formats a deadline as it is kept, to the nanosecond: a message in
// whole seconds would name a moment before it, when a decision was still
// taken.
const instant = time.RFC3339Nano

// pastExpiry refuses a decision of cp at now, once cp has expired
// (CHECKPOINT_EXPIRED): the expiry decided it (applyExpiry), if no one did
// before.
func pastExpiry(cp *belay.Checkpoint, now time.Time) error {
	if expiredAt(cp, now) {
		return belay.Errorf(belay.CodeCheckpointExpired, "checkpoint %s expired at %s; no one may decide it since", cp.ID, cp.ExpiresAt.Format(instant)).
			With("checkpointId", cp.ID).With("expiresAt", cp.ExpiresAt).With("decision", cp.Decision)
	}
	return nil
}

// retried says whether in retries the caller's decision of cp under its
// idempotency key.
func retried(cp *belay.Checkpoint, c caller, in belay.DecideInput) bool {
	d := cp.Decision
	return d != nil && in.IdempotencyKey != "" && d.IdempotencyKey == in.IdempotencyKey && d.UserID == c.UserID
}

// decideOpen records in, the caller's decision of cp — an open request of
// sess it may decide — in tx at now.
func (s *Service) decideOpen(ctx context.Context, tx store.Tx, c caller, sess *belay.Session, cp *belay.Checkpoint, in belay.DecideInput, now time.Time) (*belay.Decision, error) {
	if err := pastExpiry(cp, now); err != nil {
		return nil, err
	}
	opt, err := ChooseOption(cp.HITL, in.SelectedOption, in.Action)
	if err != nil {
		return nil, err
	}
	if len(in.Modifications) > 0 && opt.Action != belay.ActionModify {
		return nil, belay.Invalid("modifications", "modifications are only allowed with action modify")
	}
	d := &belay.Decision{
		ID: newID(), UserID: c.UserID, Action: opt.Action, SelectedOption: opt.ID, Feedback: in.Feedback,
		Modifications: compactJSON(in.Modifications), DecidedAt: now,
		ResponseTime: now.Sub(cp.CreatedAt).Milliseconds(), IdempotencyKey: in.IdempotencyKey,
	}
	// An Adjust plan decision on a trigger checkpoint carries the
	// adjustment: a bad one refuses the decision, nothing changes.
	if err := s.adjustOnDecision(ctx, tx, sess, cp, d); err != nil {
		return nil, err
	}
	if err := s.recordDecision(ctx, tx, sess, cp, d); err != nil {
		return nil, err
	}
	return d, nil
}

// answer records a, the caller's answer to a request of sess (whose rights
// in it are rt), in tx as Decide would — a timeout or expiry that is due
// applied first — unless the request is decided already: then its decision
// stands.
func (s *Service) answer(ctx context.Context, tx store.Tx, c caller, sess *belay.Session, rt rights, a belay.DecideInput) error {
	cp, err := tx.GetCheckpoint(ctx, a.CheckpointID)
	if err != nil && !belay.IsCode(err, belay.CodeCheckpointNotFound) {
		return err
	}
	if cp == nil || cp.SessionID != sess.ID {
		return belay.Invalid("answers", "checkpoint %s is not one of session %s", a.CheckpointID, sess.ID)
	}
	if err := cp.VerifyChecksum(); err != nil {
		return err
	}
	if !cp.HITLRequired {
		return belay.Errorf(belay.CodeHITLNotRequired, "checkpoint %s does not ask for a decision", cp.ID).With("checkpointId", cp.ID)
	}
	if err := mayDecide(c, rt, cp); err != nil {
		return err
	}
	now := s.clock.Now()
	if due(cp, now) {
		if err := s.applyDue(ctx, tx, cp); err != nil {
			return err
		}
		// The timeout or expiry moved the session and the request on: read
		// both again.
		fresh, err := tx.GetSession(ctx, sess.ID)
		if err != nil {
			return err
		}
		*sess = *fresh
		if cp, err = tx.GetCheckpoint(ctx, cp.ID); err != nil {
			return err
		}
	}
	if cp.Decision != nil {
		return decidedOtherwise(cp, a)
	}
	_, err = s.decideOpen(ctx, tx, c, sess, cp, a, now)
	if errors.Is(err, errDecidedMeanwhile) {
		if cp, err = tx.GetCheckpoint(ctx, cp.ID); err != nil {
			return err
		}
		return decidedOtherwise(cp, a)
	}
	return err
}

// decidedOtherwise is what an answer a to request cp, decided already, comes
// to: nothing (the answer is dropped), unless a.RequireOpen and the decision
// chose another option: then HITL_ALREADY_DECIDED.
func decidedOtherwise(cp *belay.Checkpoint, a belay.DecideInput) error {
	if d := cp.Decision; d != nil && a.RequireOpen && d.SelectedOption != a.SelectedOption {
		return belay.Errorf(belay.CodeHITLAlreadyDecided, "checkpoint %s was decided meanwhile: %s by %s, not %s", cp.ID, d.SelectedOption, d.UserID, a.SelectedOption).
			With("checkpointId", cp.ID).With("decision", d)
	}
	return nil
}

// ChooseOption returns the option a decision picks: optionID among the
// request's options (INVALID_OPTION naming the choices otherwise), whose
// action must be action when action is set.
func ChooseOption(h *belay.HITLRequest, optionID string, action belay.Action) (belay.HITLOption, error) {
	opt, ok := h.Option(optionID)
	if !ok {
		ids := make([]string, len(h.Options))
		for i, o := range h.Options {
			ids[i] = o.ID
		}
		return belay.HITLOption{}, belay.Errorf(belay.CodeInvalidOption, "option %q is not offered; choose one of %v", optionID, ids).
			With("selectedOption", optionID).With("options", ids)
	}
	if action != "" && opt.Action != action {
		return belay.HITLOption{}, belay.Errorf(belay.CodeInvalidOption, "option %q means %s, not %s", opt.ID, opt.Action, action).
			With("selectedOption", opt.ID).With("action", action).With("optionAction", opt.Action)
	}
	return opt, nil
}

// recordDecision stores d if cp is still undecided and moves the session on.
func (s *Service) recordDecision(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint, d *belay.Decision) error {
	won, err := tx.DecideIfPending(ctx, cp.ID, d)
	if err != nil {
		return err
	}
	if !won {
		return fmt.Errorf("%w: %w", errDecidedMeanwhile,
			belay.Errorf(belay.CodeHITLAlreadyDecided, "checkpoint %s was already decided", cp.ID).With("checkpointId", cp.ID))
	}
	return s.decided(ctx, tx, sess, cp, d)
}

// decided records the events of d, just stored as cp's decision, and moves
// the session on.
func (s *Service) decided(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint, d *belay.Decision) error {
	cp.Decision, cp.UpdatedAt = d, d.DecidedAt
	if err := s.appendEvent(ctx, tx, belay.EventHITLDecided, sess.ID, cp.ID, withApprovers(cp, map[string]any{
		"decision": d, "title": cp.HITL.Title})); err != nil {
		return err
	}
	to, err := s.statusAfter(ctx, tx, sess, cp, d.Action)
	if err != nil {
		return err
	}
	if err := s.setStatus(ctx, tx, sess, to, "hitl."+string(d.Action)); err != nil {
		return err
	}
	sess.UpdatedAt = d.DecidedAt
	return tx.UpdateSession(ctx, sess)
}

// statusAfter is the session flow of a decision:
//
//	approve, modify, retry, skip → running (awaiting_input while other requests are open)
//	reject                       → failed, or running when the request says onReject=continue
//	escalate                     → stays awaiting_input, the escalation recorded
//	pause (timeout default)      → paused, the request left open
//
// Only a running, awaiting or paused session moves; a failed, completed or
// abandoned one keeps its status.
func (s *Service) statusAfter(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint, a belay.Action) (belay.SessionStatus, error) {
	switch sess.Status {
	case belay.SessionAwaitingInput, belay.SessionPaused, belay.SessionRunning:
	default:
		// A failed, completed, abandoned or interrupted session keeps its
		// status: a later decision (or timeout) on another request of it
		// must not undo a rejection.
		return sess.Status, nil
	}
	switch a {
	case belay.ActionEscalate:
		return belay.SessionAwaitingInput, nil
	case belay.ActionPause:
		return belay.SessionPaused, nil
	case belay.ActionReject:
		if cp.HITL.OnReject != belay.OnRejectContinue {
			return belay.SessionFailed, nil
		}
	}
	open, _, err := tx.PendingHITL(ctx, store.PendingQuery{Scope: store.Everything, SessionID: sess.ID, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(open) > 0 {
		return belay.SessionAwaitingInput, nil
	}
	return belay.SessionRunning, nil
}

// due reports whether one of cp's deadlines passed at now and was not
// applied: its timeout, or its checkpoint's expiry.
func due(cp *belay.Checkpoint, now time.Time) bool {
	return timeoutDue(cp, now) || expiryDue(cp, now)
}

// timeoutDue reports whether cp's timeout passed at now, before its
// checkpoint's expiry, and was not applied.
func timeoutDue(cp *belay.Checkpoint, now time.Time) bool {
	if !cp.Pending() || cp.TimeoutFired || cp.HITL.Timeout == nil {
		return false
	}
	t := cp.HITL.Timeout.ExpiresAt
	return !now.Before(t) && (cp.ExpiresAt == nil || t.Before(*cp.ExpiresAt))
}

// expiryDue reports whether cp is still undecided at or after its
// checkpoint's expiry, when no one may decide it any more.
func expiryDue(cp *belay.Checkpoint, now time.Time) bool {
	return cp.Pending() && expiredAt(cp, now)
}

// expiredAt says whether cp's checkpoint expiry has come at now.
func expiredAt(cp *belay.Checkpoint, now time.Time) bool {
	return cp.ExpiresAt != nil && !now.Before(*cp.ExpiresAt)
}

// nextDeadline is when and how cp, undecided, is settled without a person:
// its timeout unless applied, or its checkpoint's expiry, whichever comes
// first; the expiry when both fall at once, as applyDue applies them.
func nextDeadline(cp *belay.Checkpoint) (belay.HITLDeadline, bool) {
	if !cp.Pending() {
		return belay.HITLDeadline{}, false
	}
	h := cp.HITL
	t := h.Timeout
	if cp.TimeoutFired {
		t = nil
	}
	if e := cp.ExpiresAt; e != nil && (t == nil || !t.ExpiresAt.Before(*e)) {
		a := expiryAction(h)
		return belay.HITLDeadline{At: *e, Reason: belay.DeadlineExpired, Action: a, Option: optionFor(h, a)}, true
	}
	if t != nil {
		return belay.HITLDeadline{At: t.ExpiresAt, Reason: belay.DeadlineTimeout, Action: t.DefaultAction, Option: optionFor(h, t.DefaultAction)}, true
	}
	return belay.HITLDeadline{}, false
}

// applyDue applies what fell due of cp's deadlines, in their order: its
// timeout (applyTimeout), then its checkpoint's expiry (applyExpiry), which
// also decides a request its timeout paused. It takes the session before the
// request, the order every transaction that decides keeps (readCheckpoint,
// then DecideIfPending): one that took the request first and then waited for
// the session could be waiting for a decider that holds the session and
// waits for the request (PostgreSQL: deadlock detected).
func (s *Service) applyDue(ctx context.Context, tx store.Tx, cp *belay.Checkpoint) error {
	sess, err := tx.GetSession(ctx, cp.SessionID)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	if timeoutDue(cp, now) {
		if err := s.applyTimeout(ctx, tx, sess, cp); err != nil {
			return err
		}
	}
	if expiryDue(cp, now) {
		return s.applyExpiry(ctx, tx, sess, cp)
	}
	return nil
}

// applyTimeout applies cp's default action exactly once: approve or reject
// become an automatic decision; pause pauses the session and leaves the
// request open for a human.
func (s *Service) applyTimeout(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint) error {
	fired, err := tx.MarkTimeoutFired(ctx, cp.ID)
	if err != nil || !fired {
		return err
	}
	cp.TimeoutFired = true
	t := cp.HITL.Timeout
	if err := s.appendEvent(ctx, tx, belay.EventHITLTimedOut, sess.ID, cp.ID, withApprovers(cp, map[string]any{
		"reason": belay.DeadlineTimeout, "defaultAction": t.DefaultAction, "expiresAt": t.ExpiresAt})); err != nil {
		return err
	}
	now := s.clock.Now()
	if t.DefaultAction == belay.ActionPause {
		if err := s.setStatus(ctx, tx, sess, belay.SessionPaused, "hitl.timed_out"); err != nil {
			return err
		}
		sess.UpdatedAt = now
		return tx.UpdateSession(ctx, sess)
	}
	d := &belay.Decision{
		ID: newID(), UserID: SystemUser, Action: t.DefaultAction, SelectedOption: optionFor(cp.HITL, t.DefaultAction),
		Feedback:  fmt.Sprintf("no decision within %d s; default action applied", t.Duration),
		DecidedAt: now, ResponseTime: now.Sub(cp.CreatedAt).Milliseconds(), AutoTriggered: true,
	}
	return s.recordDecision(ctx, tx, sess, cp, d)
}

// applyExpiry decides cp at its checkpoint's expiry, when no one may decide
// it any more: with its timeout's default action when that approves or
// rejects, else (no timeout, or a pause) with a rejection. Only the
// transaction that stores the decision records its events, so the expiry
// fires once however many sweepers and readers notice it.
func (s *Service) applyExpiry(ctx context.Context, tx store.Tx, sess *belay.Session, cp *belay.Checkpoint) error {
	a := expiryAction(cp.HITL)
	now := s.clock.Now()
	d := &belay.Decision{
		ID: newID(), UserID: SystemUser, Action: a, SelectedOption: optionFor(cp.HITL, a),
		Feedback:  fmt.Sprintf("expired at %s with no decision; %s", cp.ExpiresAt.Format(instant), expiryOutcome(cp.HITL, a)),
		DecidedAt: now, ResponseTime: now.Sub(cp.CreatedAt).Milliseconds(), AutoTriggered: true,
	}
	won, err := tx.DecideIfPending(ctx, cp.ID, d)
	if err != nil || !won {
		return err
	}
	if err := s.appendEvent(ctx, tx, belay.EventHITLTimedOut, sess.ID, cp.ID, withApprovers(cp, map[string]any{
		"reason": belay.DeadlineExpired, "defaultAction": a, "expiresAt": cp.ExpiresAt})); err != nil {
		return err
	}
	return s.decided(ctx, tx, sess, cp, d)
}

// expiryAction is the action the expiry of h's checkpoint decides h with:
// its timeout's default action when that approves or rejects, else reject
// (no one approved in time).
func expiryAction(h *belay.HITLRequest) belay.Action {
	if t := h.Timeout; t != nil && (t.DefaultAction == belay.ActionApprove || t.DefaultAction == belay.ActionReject) {
		return t.DefaultAction
	}
	return belay.ActionReject
}

// expiryOutcome says what the expiry decided with action a.
func expiryOutcome(h *belay.HITLRequest, a belay.Action) string {
	if h.Timeout != nil && h.Timeout.DefaultAction == a {
		return fmt.Sprintf("the timeout's default action (%s) applied", a)
	}
	if optionFor(h, a) == "" {
		return "rejected (no option offered rejects)"
	}
	return "rejected"
}

// optionFor picks the option an automatic decision with action a stands for:
// the default option when it has that action, else the first with it, else
// none (a request stored before every expiring request had to offer a
// reject option).
func optionFor(h *belay.HITLRequest, a belay.Action) string {
	for _, o := range h.Options {
		if o.IsDefault && o.Action == a {
			return o.ID
		}
	}
	for _, o := range h.Options {
		if o.Action == a {
			return o.ID
		}
	}
	return ""
}

// settleDue applies what fell due of checkpoint id's deadlines (applyDue).
// Reads call it so correctness never depends on a sweeper running.
func (s *Service) settleDue(ctx context.Context, id string) error {
	cp, err := s.store.GetCheckpoint(ctx, id)
	if err != nil || !due(cp, s.clock.Now()) {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		cp, err := tx.GetCheckpoint(ctx, id)
		if err != nil || !due(cp, s.clock.Now()) {
			return err
		}
		return s.applyDue(ctx, tx, cp)
	})
}

// sweepBatch bounds the requests settled in one transaction.
const sweepBatch = 100

// Sweep settles every request with a deadline due (applyDue: its timeout, its
// checkpoint's expiry) and returns how many it settled.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	// A read first: most sweeps find nothing due and need no write transaction.
	next, ok, err := s.store.NextHITLDeadline(ctx)
	if err != nil || !ok || next.After(s.clock.Now()) {
		return 0, err
	}
	total := 0
	for {
		n := 0
		err := s.store.Update(ctx, func(tx store.Tx) error {
			list, err := tx.DueHITL(ctx, s.clock.Now(), sweepBatch)
			if err != nil {
				return err
			}
			for _, cp := range list {
				if err := s.applyDue(ctx, tx, cp); err != nil {
					return err
				}
			}
			n = len(list)
			return nil
		})
		s.health.note(err)
		if err != nil {
			return total, err
		}
		if n > 0 { // an idle sweep wakes no one, least of all RunSweeper itself
			s.notify()
		}
		total += n
		if n < sweepBatch {
			return total, nil
		}
	}
}

// SweepInterval is the longest a sweeper sleeps: it also notices requests
// created by other processes on the same database.
const SweepInterval = time.Second

// sweepGap is the least time between two sweeps that saves woke (see
// pace.Pacer): a request's deadline is looked at up to this much later than at
// once, which only one that falls due within it notices.
const sweepGap = 20 * time.Millisecond

// RunSweeper applies timeouts as they fall due, interrupts sessions whose
// lease lapsed, and applies retention policies every RetentionInterval, until
// ctx ends. Every long-running process runs one; several may run at once.
func (s *Service) RunSweeper(ctx context.Context) {
	wake, cancel := s.Wake()
	defer cancel()
	var lastRetention time.Time
	var backoff time.Duration
	pacer := pace.Pacer{Gap: sweepGap}
	for {
		_, sweepErr := s.Sweep(ctx)
		if sweepErr != nil && ctx.Err() == nil {
			s.log.Error("hitl sweeper", "error", sweepErr)
		}
		if _, err := s.sweepLeases(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("lease sweeper", "error", err)
		}
		if now := time.Now(); now.Sub(lastRetention) >= RetentionInterval {
			lastRetention = now
			if _, err := s.ApplyRetention(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("retention", "error", err)
			}
		}
		sleep, stuck := SweepInterval, sweepErr != nil
		if !stuck {
			if next, ok, err := s.store.NextHITLDeadline(ctx); err == nil && ok {
				wait := next.Sub(s.clock.Now())
				stuck = wait <= 0
				sleep = min(sleep, wait)
			}
		}
		// A sweep that failed, or left a deadline past (a request another
		// transaction holds, or one that fell due meanwhile), is tried again
		// soon, but not at once: while the storage fails that would be
		// hundreds of failures a second. The wait doubles from a millisecond
		// up to the interval, and starts over once a sweep leaves nothing due.
		if stuck {
			backoff = min(max(2*backoff, time.Millisecond), SweepInterval)
			sleep = backoff
		} else {
			backoff = 0
		}
		if !pacer.Pause(ctx, wake, nil, sleep) {
			return
		}
	}
}

// PendingHITL returns the open requests the caller may decide, oldest first.
func (s *Service) PendingHITL(ctx context.Context, sessionID string) ([]belay.PendingHITL, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if sessionID != "" {
		if err := belay.ValidateID("session", sessionID); err != nil {
			return nil, err
		}
	}
	if _, err := s.Sweep(ctx); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	sessions := map[string]sessionRights{}
	out := []belay.PendingHITL{}
	// The query keeps to the sessions the caller may read and the requests
	// naming it as approver; page on until maxPending it may decide are
	// found, so requests it may only read do not hide the rest.
	err = walk(func(after *store.CheckpointKey) ([]*belay.Checkpoint, bool, error) {
		return s.store.PendingHITL(ctx, store.PendingQuery{Scope: c.scope(), SessionID: sessionID, After: after, Limit: storePage, MaxBytes: store.PageBytes})
	}, checkpointKey, func(cp *belay.Checkpoint) error {
		p, ok, err := s.pendingFor(ctx, c, now, sessions, cp)
		if err != nil || !ok {
			return err
		}
		out = append(out, p)
		if len(out) == maxPending {
			return errEnough
		}
		return nil
	})
	if err != nil && err != errEnough {
		return nil, err
	}
	return out, nil
}

// errEnough ends a walk that found all it needs.
var errEnough = errors.New("enough")

// maxPending bounds the pending list.
const maxPending = 500

// sessionRights is a session and the caller's rights in it.
type sessionRights struct {
	sess *belay.Session
	rt   rights
}

// pendingFor describes one open request, when the caller may decide it.
func (s *Service) pendingFor(ctx context.Context, c caller, now time.Time, sessions map[string]sessionRights, cp *belay.Checkpoint) (belay.PendingHITL, bool, error) {
	if err := cp.VerifyChecksum(); err != nil {
		return belay.PendingHITL{}, false, err
	}
	sr, ok := sessions[cp.SessionID]
	if !ok {
		sess, err := s.store.GetSession(ctx, cp.SessionID)
		if err != nil {
			return belay.PendingHITL{}, false, err
		}
		rt, err := rightsIn(ctx, s.store, c, sess)
		if err != nil {
			return belay.PendingHITL{}, false, err
		}
		sr = sessionRights{sess, rt}
		sessions[cp.SessionID] = sr
	}
	sess := sr.sess
	if mayDecide(c, sr.rt, cp) != nil {
		return belay.PendingHITL{}, false, nil
	}
	p := belay.PendingHITL{Checkpoint: cp, Session: belay.PendingSession{ID: sess.ID, Title: sess.Title, Status: sess.Status,
		Phase: sess.Phase, Readable: sr.rt.read}}
	if p.Session.Title == "" {
		p.Session.Title = sess.ProjectPath
	}
	if d, ok := nextDeadline(cp); ok {
		left := int64(d.At.Sub(now).Seconds())
		p.Deadline, p.TimeRemaining = &d, &left
	}
	return p, true, nil
}

// pollInterval bounds how long a waiter on a request with a pending timeout
// goes without reading it.
const pollInterval = 250 * time.Millisecond

// decisionEvents are the events after which a waiter looks at its request
// again.
var decisionEvents = []string{belay.EventHITLDecided, belay.EventHITLTimedOut, belay.EventCheckpointDeleted}

// WaitDecision returns as soon as checkpoint id is decided (at once when it
// already is), or after wait with Decided false. Waiters listen to the shared
// event tailer for their own session's decisions, so a thousand of them cost
// nothing while other sessions change; decisions made by other processes on
// the same database arrive with the tailer's poll.
func (s *Service) WaitDecision(ctx context.Context, id string, wait time.Duration) (*belay.WaitResult, error) {
	c, err := authorize(ctx, belay.ScopeRead)
	if err != nil {
		return nil, err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return nil, err
	}
	if wait < 0 || wait > belay.MaxWait {
		return nil, belay.Invalid("wait", "wait must be a duration from 0s to %s, e.g. 30s; got %q", belay.MaxWait, wait)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var sub *subscriber
	defer func() {
		if sub != nil {
			s.hub.remove(sub)
		}
	}()
	for {
		if sub != nil {
			// Waited: the token that began the wait may have been revoked.
			if err := s.stillValid(ctx, c, "the wait ends"); err != nil {
				return nil, err
			}
		}
		// Read after subscribing: a decision made in between is seen here.
		cp, _, rt, err := readCheckpoint(ctx, s.store, c, id)
		if err != nil {
			return nil, err
		}
		if cp, err = s.settle(ctx, cp); err != nil {
			return nil, err
		}
		if !cp.HITLRequired {
			return nil, belay.Errorf(belay.CodeHITLNotRequired, "checkpoint %s does not ask for a decision", cp.ID).With("checkpointId", cp.ID)
		}
		if cp.Decision != nil {
			// Read again: settling may have moved the session on.
			sess, err := s.store.GetSession(ctx, cp.SessionID)
			if err != nil {
				return nil, err
			}
			return &belay.WaitResult{Decided: true, Decision: cp.Decision, Checkpoint: cp, Session: shownSession(sess, rt)}, nil
		}
		if sub == nil {
			// The caller may read cp: its session's decision events are
			// watched for it without a scope of their own.
			if sub, err = s.hub.add(ctx, store.EventQuery{Scope: store.Everything, SessionID: cp.SessionID, Types: decisionEvents}); err != nil {
				return nil, err
			}
			continue
		}
		// A pending timeout or expiry is settled by the read when it falls
		// due, also where no sweeper runs (the CLI on a local database): read
		// again by then, and at least every pollInterval, since the clock
		// that decides may not be this process's timer.
		var expiry <-chan time.Time
		var timer *time.Timer
		if next, ok := nextDeadline(cp); ok {
			timer = time.NewTimer(min(pollInterval, max(next.At.Sub(s.clock.Now()), time.Millisecond)))
			expiry = timer.C
		}
		err = s.awaitEvent(ctx, &sub, id, deadline.C, expiry)
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			if err == errWaitOver {
				return &belay.WaitResult{Checkpoint: cp}, nil
			}
			return nil, err
		}
	}
}

var errWaitOver = errors.New("wait over")

// awaitEvent blocks until an event about checkpoint id arrives on *sub, the
// request's timeout falls due, or the wait ends (errWaitOver). A
// subscription dropped for falling behind is renewed; the caller reads again.
func (s *Service) awaitEvent(ctx context.Context, sub **subscriber, id string, deadline, expiry <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errWaitOver
		case <-expiry:
			return nil
		case e, ok := <-(*sub).ch:
			if !ok {
				q := (*sub).q
				s.hub.remove(*sub)
				var err error
				*sub, err = s.hub.add(ctx, q)
				return err
			}
			if e.CheckpointID == id {
				return nil
			}
		}
	}
}
