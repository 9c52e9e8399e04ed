package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// Checkpoint is seed 003's checkpoint object, with belay's session, number
// and snapshot beside it.
type Checkpoint struct {
	ID          string            `json:"id"`
	Summary     string            `json:"summary"`
	Description string            `json:"description"`
	ProjectPath string            `json:"project_path"`
	Context     map[string]string `json:"context"`
	Tags        []string          `json:"tags"`
	TokenCount  int               `json:"token_count"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	SessionID   string            `json:"session_id"`
	Seq         int64             `json:"seq"`
	Name        string            `json:"name,omitempty"`
	Snapshot    string            `json:"snapshot,omitempty"`
	// Pending is true for a question to a person that waits for an answer.
	Pending bool `json:"pending,omitempty"`
}

func toCheckpoint(cp *belay.Checkpoint) Checkpoint {
	out := Checkpoint{ID: cp.ID, Summary: cp.Summary, Description: cp.Description, ProjectPath: cp.ProjectPath,
		Context: cp.Context, Tags: cp.Tags, TokenCount: cp.TokenCount, CreatedAt: cp.CreatedAt, UpdatedAt: cp.UpdatedAt,
		SessionID: cp.SessionID, Seq: cp.Seq, Name: cp.Name, Pending: cp.Pending()}
	if cp.HasSnapshot() {
		out.Snapshot = cp.WorkspaceRef // a commit its caller named is no snapshot
	}
	if out.Context == nil {
		out.Context = map[string]string{}
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	return out
}

// SaveInput is checkpoint_save's input (seed 003).
type SaveInput struct {
	Summary     string         `json:"summary" jsonschema:"what was done, in one line (1-500 characters)"`
	Description string         `json:"description,omitempty" jsonschema:"details: what changed and why (at most 10000 characters)"`
	ProjectPath string         `json:"project_path" jsonschema:"absolute path of the project directory; its files are snapshotted"`
	Context     map[string]any `json:"context,omitempty" jsonschema:"key/value metadata, e.g. branch or ticket (at most 50 pairs)"`
	Tags        []string       `json:"tags,omitempty" jsonschema:"tags to find it by (at most 20, each at most 50 characters)"`
}

// SearchInput is checkpoint_search's input (seed 003).
type SearchInput struct {
	Query       string   `json:"query" jsonschema:"what you look for, in words (1-1000 characters)"`
	ProjectPath string   `json:"project_path,omitempty" jsonschema:"only checkpoints of this project (its absolute path)"`
	Tags        []string `json:"tags,omitempty" jsonschema:"only checkpoints carrying every one of these tags"`
	TopK        int      `json:"top_k,omitempty" jsonschema:"how many results (default 5, at most 100)"`
}

// SearchOutput is checkpoint_search's output: results best first, never null.
type SearchOutput struct {
	Results []SearchResult `json:"results"`
	Query   string         `json:"query"`
	TopK    int            `json:"top_k"`
	// Warnings say what the search did without, e.g. the vector ranking
	// when the embedding endpoint is down.
	Warnings []string `json:"warnings,omitempty"`
}

// SearchResult is one checkpoint found: score in [0,1], higher is better;
// distance is 1 − the cosine similarity (1 while it has no vector yet).
type SearchResult struct {
	Checkpoint Checkpoint `json:"checkpoint"`
	Score      float64    `json:"score"`
	Distance   float64    `json:"distance"`
}

// ListInput is checkpoint_list's input (seed 003).
type ListInput struct {
	Limit       int    `json:"limit,omitempty" jsonschema:"how many (default 10, at most 100)"`
	Offset      int    `json:"offset,omitempty" jsonschema:"how many to skip (default 0)"`
	ProjectPath string `json:"project_path,omitempty" jsonschema:"only checkpoints of this project (its absolute path)"`
	SortBy      string `json:"sort_by,omitempty" jsonschema:"created_at (the default) or updated_at (a decision updates a question), newest first"`
}

// ListOutput is checkpoint_list's output.
type ListOutput struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
	Total       int64        `json:"total"`
	Limit       int          `json:"limit"`
	Offset      int          `json:"offset"`
	// HasMore and NextOffset page on: a page holds fewer than limit when
	// the checkpoints' states are large (see store.PageBytes).
	HasMore    bool `json:"has_more"`
	NextOffset int  `json:"next_offset,omitempty"`
}

// IDInput names one checkpoint.
type IDInput struct {
	ID string `json:"id" jsonschema:"the checkpoint's id, or a unique prefix of it"`
}

// DiffInput is checkpoint_diff's input.
type DiffInput struct {
	ID string `json:"id" jsonschema:"the checkpoint to compare from"`
	To string `json:"to,omitempty" jsonschema:"another checkpoint's id; default: the files as they are now"`
}

// DiffOutput is what changed between two states of the files.
type DiffOutput struct {
	Files     []belay.FileDiff `json:"files"`
	Additions int              `json:"additions"`
	Deletions int              `json:"deletions"`
	Patch     string           `json:"patch"`
}

// RollbackInput is checkpoint_rollback's input.
type RollbackInput struct {
	ID     string `json:"id" jsonschema:"the checkpoint to go back to"`
	Reason string `json:"reason,omitempty" jsonschema:"why, kept in the history"`
	DryRun bool   `json:"dry_run,omitempty" jsonschema:"list what would change and change nothing"`
}

// RollbackOutput is what a rollback did.
type RollbackOutput struct {
	RestoredFiles []string `json:"restored_files"`
	RemovedFiles  []string `json:"removed_files"`
	// UndoID is the checkpoint of the state before the rollback: rolling back
	// to it undoes this rollback.
	UndoID string `json:"undo_id,omitempty"`
	DryRun bool   `json:"dry_run"`
	// StateOnly says the checkpoint had no snapshot: the agent state alone
	// was rolled back, the files left as they are.
	StateOnly bool `json:"state_only,omitempty"`
}

// ResumeInput is session_resume's input.
type ResumeInput struct {
	ProjectPath string `json:"project_path,omitempty" jsonschema:"resume the newest interrupted session of this project (its absolute path)"`
	SessionID   string `json:"session_id,omitempty" jsonschema:"or this session"`
}

// ResumeOutput is where to continue from.
type ResumeOutput struct {
	SessionID string          `json:"session_id"`
	Status    string          `json:"status"`
	Head      *Checkpoint     `json:"head,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	NextTask  string          `json:"next_task,omitempty"`
	Pending   []Checkpoint    `json:"pending"`
	// MorePending: more requests wait than pending holds.
	MorePending bool `json:"more_pending,omitempty" jsonschema:"more requests wait for a decision than pending lists"`
}

// AskOption is one answer a person may give.
type AskOption struct {
	ID     string `json:"id" jsonschema:"short id, e.g. yes"`
	Label  string `json:"label" jsonschema:"what the person sees"`
	Action string `json:"action" jsonschema:"approve, reject, modify, retry, skip or escalate"`
}

// AskInput is ask_human's input.
type AskInput struct {
	ProjectPath string      `json:"project_path" jsonschema:"absolute path of the project you work on"`
	Question    string      `json:"question" jsonschema:"the decision, as a question (1-200 characters)"`
	Details     string      `json:"details,omitempty" jsonschema:"what the person needs to know to decide"`
	Options     []AskOption `json:"options,omitempty" jsonschema:"the answers (default approve / reject)"`
	Default     string      `json:"default,omitempty" jsonschema:"the option taken when nobody answers in time: an option's id whose action is approve or reject (approve or reject without options), or pause to leave the question open; without it the timeout rejects"`
	TimeoutSec  int         `json:"timeout_seconds,omitempty" jsonschema:"after this long the default is taken (60-86400)"`
	WaitSec     *int        `json:"wait_seconds,omitempty" jsonschema:"how long to wait here for the answer (default 20; 0 returns at once)"`
}

// WaitInput is hitl_wait's input.
type WaitInput struct {
	ID      string `json:"id" jsonschema:"the question's checkpoint id, from ask_human"`
	WaitSec *int   `json:"wait_seconds,omitempty" jsonschema:"how long to wait (default 20; 0 returns at once)"`
}

// Answer is a person's decision, or that none came yet.
type Answer struct {
	ID       string          `json:"id"`
	Decided  bool            `json:"decided"`
	Action   string          `json:"action,omitempty"`
	Option   string          `json:"option,omitempty"`
	Feedback string          `json:"feedback,omitempty"`
	Changes  json.RawMessage `json:"modifications,omitempty"`
	By       string          `json:"by,omitempty"`
}

func (s *server) tools() []tool {
	return []tool{
		typed(s, "checkpoint_save", `Save a checkpoint of your work: a snapshot of the project's files (never touching its git) and your summary. Call it after each meaningful step and before anything risky; checkpoint_rollback can return to it. Returns the checkpoint with its id.`,
			limits{maxLen: map[string]int{"summary": belay.MaxSummary, "description": belay.MaxDescription}, maxItems: map[string]int{"tags": belay.MaxTags},
				required: []string{"summary", "project_path"}}.apply, s.save),
		typed(s, "checkpoint_search", `Find checkpoints by what they say: full-text and vector rankings fused, best first, with no minimum score. Filter by project_path and tags (all must match).`,
			limits{maxLen: map[string]int{"query": belay.MaxQueryLength}, maxItems: map[string]int{"tags": belay.MaxTags},
				min: map[string]float64{"top_k": 1}, max: map[string]float64{"top_k": belay.MaxTopK}, required: []string{"query"}}.apply, s.search),
		typed(s, "checkpoint_list", `List checkpoints, newest first, with offset paging and the accurate total: while has_more, the next page begins at next_offset.`,
			limits{min: map[string]float64{"limit": 1, "offset": 0}, max: map[string]float64{"limit": 100},
				enum: map[string][]any{"sort_by": {"created_at", "updated_at"}}}.apply, s.list),
		typed(s, "checkpoint_get", `Get one checkpoint by id.`, limits{required: []string{"id"}}.apply, s.get),
		typed(s, "checkpoint_diff", `Show what changed in the files since a checkpoint (or between two): files with line counts and a unified diff.`,
			limits{required: []string{"id"}}.apply, s.diff),
		typed(s, "checkpoint_rollback", `Put the project's files back as they were at a checkpoint. The current state is saved first, so the rollback can be undone (undo_id). Try dry_run first to see what would change.`,
			limits{required: []string{"id"}}.apply, s.rollback),
		typed(s, "session_resume", `After a crash or restart: take over the interrupted session and learn where to continue (head checkpoint, agent state, next task, open questions).`,
			limits{}.apply, s.resume),
		typed(s, "ask_human", `Ask a person to decide before an irreversible or risky step. Waits up to wait_seconds for the answer; if none came, returns decided=false and the id to pass to hitl_wait.`,
			limits{maxLen: map[string]int{"question": belay.MaxHITLTitle, "details": belay.MaxHITLMessage}, maxItems: map[string]int{"options": belay.MaxHITLOptions},
				min: map[string]float64{"timeout_seconds": belay.MinTimeoutSeconds, "wait_seconds": 0}, max: map[string]float64{"timeout_seconds": belay.MaxTimeoutSeconds, "wait_seconds": 25},
				required: []string{"project_path", "question"}}.apply, s.ask),
		typed(s, "hitl_wait", `Wait for the answer to a question asked with ask_human.`,
			limits{min: map[string]float64{"wait_seconds": 0}, max: map[string]float64{"wait_seconds": 25}, required: []string{"id"}}.apply, s.wait),
	}
}

// contextStrings turns seed 003's free-form context into belay's string pairs:
// strings as they are, anything else as its JSON.
func contextStrings(in map[string]any) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if str, ok := v.(string); ok {
			out[k] = str
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, belay.Invalid("context", "context value of %q cannot be stored", k)
		}
		out[k] = string(b)
	}
	return out, nil
}

func (s *server) save(ctx context.Context, in *SaveInput) (*Checkpoint, error) {
	if in.ProjectPath == "" {
		return nil, belay.Invalid("project_path", "project_path is required")
	}
	pairs, err := contextStrings(in.Context)
	if err != nil {
		return nil, err
	}
	cp, err := s.svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: in.ProjectPath, Summary: in.Summary,
		Description: in.Description, Context: pairs, Tags: in.Tags, Type: belay.TypeAuto, Trigger: belay.TriggerSubtaskComplete, Snapshot: true})
	if err != nil {
		return nil, snakeField(err)
	}
	out := toCheckpoint(cp)
	return &out, nil
}

func (s *server) search(ctx context.Context, in *SearchInput) (*SearchOutput, error) {
	res, err := s.svc.SearchCheckpoints(ctx, belay.SearchInput{Query: in.Query, ProjectPath: in.ProjectPath, Tags: in.Tags, TopK: in.TopK})
	if err != nil {
		return nil, snakeField(err)
	}
	out := &SearchOutput{Results: []SearchResult{}, Query: res.Query, TopK: res.TopK, Warnings: res.Warnings}
	for _, h := range res.Results {
		out.Results = append(out.Results, SearchResult{Checkpoint: toCheckpoint(h.Checkpoint), Score: h.Score, Distance: h.Distance})
	}
	return out, nil
}

func (s *server) list(ctx context.Context, in *ListInput) (*ListOutput, error) {
	if in.Limit == 0 {
		in.Limit = 10
	}
	order := belay.OrderCreatedAt
	switch in.SortBy {
	case "", "created_at":
	case "updated_at":
		order = belay.OrderUpdatedAt
	default:
		return nil, belay.Invalid("sort_by", "sort_by must be created_at or updated_at, got %q", belay.Clip(in.SortBy, 40))
	}
	list, err := s.svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{ProjectPath: in.ProjectPath, Limit: in.Limit, Offset: in.Offset,
		OrderBy: order, OrderDir: belay.OrderDesc})
	if err != nil {
		return nil, snakeField(err)
	}
	out := &ListOutput{Checkpoints: []Checkpoint{}, Total: list.TotalCount, Limit: in.Limit, Offset: in.Offset, HasMore: list.HasMore}
	for _, cp := range list.Items {
		out.Checkpoints = append(out.Checkpoints, toCheckpoint(cp))
	}
	if list.HasMore {
		out.NextOffset = list.NextOffset(in.Offset)
	}
	return out, nil
}

// checkpointIDs turns each of refs, a checkpoint's id or a unique prefix of
// one (at least belay.MinIDPrefix hex digits, as the CLI takes), into the
// id, in place; other values are left for the service to refuse. An
// ambiguous or unknown prefix is refused naming field.
func (s *server) checkpointIDs(ctx context.Context, field string, refs ...*string) error {
	for _, ref := range refs {
		if !belay.IsIDPrefix(*ref) || belay.IsUUID(*ref) {
			continue
		}
		cp, err := s.svc.ResolveCheckpoint(ctx, belay.CheckpointRef{Ref: *ref})
		var be *belay.Error
		switch {
		case err == nil:
			*ref = cp.ID
		case errors.As(err, &be) && be.Details["candidates"] != nil:
			return be.With("field", field) // ambiguous
		case errors.As(err, &be) && be.Code != belay.CodeInternal && be.Code != belay.CodeStorageUnavailable:
			// No id begins so; without a session the service reads the
			// prefix as a number or a name too, which MCP takes nowhere.
			return snakeField(belay.Errorf(belay.CodeCheckpointNotFound, "no checkpoint you may read has an id beginning %q", *ref).With("id", *ref))
		default:
			return err
		}
	}
	return nil
}

func (s *server) get(ctx context.Context, in *IDInput) (*Checkpoint, error) {
	if err := s.checkpointIDs(ctx, "id", &in.ID); err != nil {
		return nil, err
	}
	cp, err := s.svc.GetCheckpoint(ctx, in.ID)
	if err != nil {
		return nil, snakeField(err)
	}
	out := toCheckpoint(cp)
	return &out, nil
}

func (s *server) diff(ctx context.Context, in *DiffInput) (*DiffOutput, error) {
	if err := s.checkpointIDs(ctx, "id", &in.ID); err != nil {
		return nil, err
	}
	if err := s.checkpointIDs(ctx, "to", &in.To); err != nil {
		return nil, err
	}
	d, err := s.svc.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: in.ID, To: in.To})
	if err != nil {
		return nil, snakeField(err)
	}
	return &DiffOutput{Files: d.Files, Additions: d.Additions, Deletions: d.Deletions, Patch: d.Patch}, nil
}

func (s *server) rollback(ctx context.Context, in *RollbackInput) (*RollbackOutput, error) {
	if err := s.checkpointIDs(ctx, "id", &in.ID); err != nil {
		return nil, err
	}
	res, err := s.svc.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: in.ID, Reason: in.Reason, DryRun: in.DryRun})
	if err != nil {
		return nil, snakeField(err)
	}
	out := &RollbackOutput{RestoredFiles: res.RestoredFiles, RemovedFiles: res.RemovedFiles, DryRun: res.DryRun, StateOnly: res.StateOnly}
	if res.SafetyCheckpoint != nil {
		out.UndoID = res.SafetyCheckpoint.ID
	}
	return out, nil
}

func (s *server) resume(ctx context.Context, in *ResumeInput) (*ResumeOutput, error) {
	res, err := s.svc.ResumeSession(ctx, belay.ResumeInput{SessionID: in.SessionID, ProjectPath: in.ProjectPath, Holder: "mcp"})
	if err != nil {
		return nil, snakeField(err)
	}
	out := &ResumeOutput{SessionID: res.Session.ID, Status: string(res.Session.Status), State: res.State, Pending: []Checkpoint{}}
	if res.Head != nil {
		h := toCheckpoint(res.Head)
		out.Head = &h
	}
	if res.NextTask != nil {
		out.NextTask = res.NextTask.Title
	}
	for _, p := range res.Pending {
		out.Pending = append(out.Pending, toCheckpoint(p))
	}
	out.MorePending = res.MorePending
	return out, nil
}

func (s *server) ask(ctx context.Context, in *AskInput) (*Answer, error) {
	if in.Question == "" || len(in.Question) > belay.MaxHITLTitle {
		return nil, belay.Invalid("question", "question must be 1-%d characters", belay.MaxHITLTitle)
	}
	h := &belay.HITLInput{Required: true, Title: in.Question, Message: in.Details}
	for _, o := range in.Options {
		h.Options = append(h.Options, belay.HITLOption{ID: o.ID, Label: o.Label, Action: belay.Action(o.Action), IsDefault: o.ID == in.Default})
	}
	// def is what the timeout takes: the default option's action; without
	// options a person answers approve or reject, by those ids.
	var def belay.Action
	switch i := slices.IndexFunc(in.Options, func(o AskOption) bool { return o.ID == in.Default }); {
	case in.Default == "":
	case i >= 0:
		def = belay.Action(in.Options[i].Action)
	case in.Default == string(belay.ActionPause):
		def = belay.ActionPause // the timeout leaves the question open, the session paused
	case len(in.Options) > 0:
		return nil, belay.Invalid("default", "default %q is none of the options' ids", belay.Clip(in.Default, 50))
	case in.Default == string(belay.ActionApprove) || in.Default == string(belay.ActionReject):
		def = belay.Action(in.Default)
	default:
		return nil, belay.Invalid("default", "without options the answers are approve and reject, so default must be one of them, got %q", belay.Clip(in.Default, 50))
	}
	if in.TimeoutSec > 0 {
		rejects := func(o AskOption) bool { return o.Action == string(belay.ActionReject) }
		if def == "" && len(in.Options) > 0 && !slices.ContainsFunc(in.Options, rejects) {
			return nil, belay.Invalid("default", "timeout_seconds needs default here: without one the timeout rejects, and none of the options rejects; name an option that approves or rejects, or pause")
		}
		if def == "" {
			def = belay.ActionReject
		}
		h.Timeout = &belay.TimeoutInput{Duration: in.TimeoutSec, DefaultAction: def}
	}
	cp, err := s.svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: in.ProjectPath, Summary: belay.Clip(in.Question, belay.MaxSummary),
		Type: belay.TypeHITL, HITL: h})
	if err != nil {
		return nil, snakeField(err)
	}
	return s.answer(ctx, cp.ID, in.WaitSec)
}

func (s *server) wait(ctx context.Context, in *WaitInput) (*Answer, error) {
	if err := s.checkpointIDs(ctx, "id", &in.ID); err != nil {
		return nil, err
	}
	return s.answer(ctx, in.ID, in.WaitSec)
}

// answer waits up to waitSec (20 s when not given; bounded by the server's
// ask wait) for the decision on id.
func (s *server) answer(ctx context.Context, id string, waitSec *int) (*Answer, error) {
	wait := 20 * time.Second
	if waitSec != nil {
		if *waitSec < 0 {
			return nil, belay.Invalid("wait_seconds", "wait_seconds must not be negative")
		}
		wait = time.Duration(*waitSec) * time.Second
	}
	res, err := s.svc.WaitDecision(ctx, id, min(wait, s.askWait))
	if err != nil {
		return nil, snakeField(err)
	}
	out := &Answer{ID: id, Decided: res.Decided}
	if d := res.Decision; d != nil {
		out.Action, out.Option, out.Feedback, out.Changes, out.By = string(d.Action), d.SelectedOption, d.Feedback, d.Modifications, d.UserID
	}
	return out, nil
}

// toolFields names belay's fields (and field prefixes) as the tools'
// arguments call them; snakeField turns the rest into snake_case.
var toolFields = []struct{ belay, tool string }{
	{"hitl.title", "question"}, {"hitl.message", "details"}, {"hitl.options", "options"},
	{"hitl.timeout.defaultAction", "default"}, {"hitl.timeout.duration", "timeout_seconds"},
	{"checkpointId", "id"},
}

// snakeField renames details.field from belay's name to the argument the
// agent sent (in the message too), so it finds what to change.
func snakeField(err error) error {
	be, ok := err.(*belay.Error)
	if !ok {
		return err
	}
	f, ok := be.Details["field"].(string)
	if !ok {
		return err
	}
	for _, r := range toolFields {
		if rest, ok := strings.CutPrefix(f, r.belay); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			return renameField(be, f, r.tool+rest)
		}
	}
	var b []byte
	for i, r := range f {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b = append(b, '_')
			}
			r += 'a' - 'A'
		}
		b = append(b, byte(r))
	}
	return renameField(be, f, string(b))
}

// renameField names the field to, not from, in be: its details and the
// first mention in its message (and in the message its details repeat).
func renameField(be *belay.Error, from, to string) *belay.Error {
	if msg, ok := be.Details["error"].(string); ok && msg == be.Message {
		be = be.With("error", strings.Replace(msg, from, to, 1))
	}
	be.Message = strings.Replace(be.Message, from, to, 1)
	return be.With("field", to)
}
