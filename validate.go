package belay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of checkpoint fields (seeds 000 and 003).
const (
	MaxSummary        = 500
	MaxDescription    = 10000
	MaxNameLen        = 200
	MaxContextPairs   = 50
	MaxContextKey     = 50
	MaxContextValue   = 500
	MaxTags           = 20
	MaxTagLen         = 50
	MaxHITLTitle      = 200
	MaxHITLMessage    = 2000
	MaxHITLOptions    = 6
	MaxOptionIDLen    = 50
	MaxOptionLabel    = 50
	MaxOptionDesc     = 200
	MinTimeoutSeconds = 60
	MaxTimeoutSeconds = 86400
	MaxFeedback       = 2000
	MaxApprovers      = 20
	MaxListLimit      = 100
	MaxOffset         = 1000000
	DefaultListLimit  = 20
	// MaxStateBytes bounds agent state, outputs and metadata, each.
	MaxStateBytes = 8 << 20
	// MaxBodyBytes bounds a request body on every transport: an agent
	// state of MaxStateBytes, plus room for the other fields.
	MaxBodyBytes = MaxStateBytes + 1<<20
	// MaxPageBytes bounds what one answer carries of agent states, outputs
	// and metadata, give or take its last item: a list page
	// (store.PageBytes), a tRPC batch.
	MaxPageBytes = 16 << 20
	// MaxEndReason bounds the reason a session ends for.
	MaxEndReason = 1000
	// MaxAnswers bounds the decisions a checkpoint carries.
	MaxAnswers = 100
	// MaxPaths bounds the touched paths given with a snapshot.
	MaxPaths = 10000
	// MaxPathLen bounds one such path and a project's path, in bytes
	// (Linux's PATH_MAX).
	MaxPathLen = 4096
	// MaxReason bounds the reason given for a rollback.
	MaxReason = 2000
	// MaxFileSizeLimit bounds CreateCheckpointInput.MaxFileSize: larger
	// files belong in git LFS or an artifact store, not in snapshots.
	MaxFileSizeLimit = 1 << 30
)

func runes(s string) int { return utf8.RuneCountInString(s) }

// IsIDPrefix reports whether ref could begin an id: at least MinIDPrefix
// and at most 36 hex digits and dashes, in either case.
func IsIDPrefix(ref string) bool {
	if len(ref) < MinIDPrefix || len(ref) > 36 {
		return false
	}
	for _, r := range strings.ToLower(ref) {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
			return false
		}
	}
	return true
}

// isCommitID reports whether s is a git commit id in hex: abbreviated (git
// takes 4 digits or more) or full (40 for SHA-1, 64 for SHA-256). Anything
// else given to git as a commit could be a name, a revision or an option.
func isCommitID(s string) bool {
	if len(s) < 4 || len(s) > 40 && len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// IsUUID reports whether s is a UUID in its canonical 36-character text form.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ValidateID returns a VALIDATION_ERROR naming field unless id is a UUID.
func ValidateID(field, id string) error {
	if !IsUUID(id) {
		return Invalid(field, "%s must be a UUID, got %q", field, Clip(id, 64))
	}
	return nil
}

// ValidateProjectPath checks that p is an absolute path of UTF-8 without
// NUL, at most MaxPathLen bytes, as both drivers store and index it. Whether
// it names a directory is core's to check (ProjectDir), once it knows the
// caller may look at the path.
func ValidateProjectPath(field, p string) error {
	switch {
	case len(p) > MaxPathLen:
		return Invalid(field, "%s is %d bytes, longer than %d", field, len(p), MaxPathLen)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return Invalid(field, "%s must be UTF-8 without NUL bytes", field)
	case !filepath.IsAbs(p):
		return Invalid(field, "%s must be an absolute path, got %q", field, Clip(p, 200))
	}
	return nil
}

// ValidateHolder checks the name of a process that holds a session's lease
// (e.g. host:pid): 1 to MaxNameLen characters of UTF-8 without NUL.
func ValidateHolder(field, holder string) error {
	if holder == "" {
		return Invalid(field, "%s must name the process holding the session (e.g. host:pid)", field)
	}
	return validText(field, holder, 1, MaxNameLen)
}

// ValidateEndReason checks why a session ends (or ended, in an archive):
// UTF-8 without NUL, at most MaxEndReason bytes.
func ValidateEndReason(field, reason string) error {
	if len(reason) > MaxEndReason {
		return Invalid(field, "%s must be at most %d bytes", field, MaxEndReason)
	}
	return validText(field, reason, 0, MaxEndReason)
}

// SeqRef reads ref as a checkpoint's number in its session, "4" or "#4". A
// reference that reads so names that checkpoint, never one by id or name.
func SeqRef(ref string) (int64, bool) {
	seq, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(ref), "#"), 10, 64)
	return seq, err == nil
}

// ProjectDir checks that the absolute path p names an existing directory.
func ProjectDir(field, p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return Invalid(field, "%s %q does not exist", field, Clip(p, 200))
	}
	if !fi.IsDir() {
		return Invalid(field, "%s %q is not a directory", field, Clip(p, 200))
	}
	return nil
}

// ValidateJSON checks a JSON document given as is (agent state, outputs,
// metadata, context, modifications, event data): within the size limit and
// valid JSON text, which is UTF-8. Invalid UTF-8 is refused rather than
// stored, since it would be echoed as invalid JSON (json.Valid does not check
// it). So are the escapes \u0000 and lone surrogates, which JSON allows but
// PostgreSQL's jsonb refuses: every document belay stores is one both drivers
// store and query alike, and a SQLite database can move to PostgreSQL.
func ValidateJSON(field string, raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	if len(raw) > MaxStateBytes {
		return Invalid(field, "%s is %d bytes, more than the limit of %d", field, len(raw), MaxStateBytes)
	}
	if !utf8.Valid(raw) {
		return Invalid(field, "%s is not valid UTF-8", field)
	}
	if !validJSON(raw) {
		return Invalid(field, "%s is not valid JSON", field)
	}
	if esc := unstorableEscape(raw); esc != "" {
		return Invalid(field, "%s holds the escape %s, which names no character belay can store (NUL, or half a surrogate pair)", field, esc)
	}
	return nil
}

func validObject(field string, raw json.RawMessage) error {
	if err := ValidateJSON(field, raw); err != nil || raw == nil {
		return err
	}
	t := bytes.TrimSpace(raw)
	if bytes.Equal(t, []byte("null")) {
		return nil
	}
	if len(t) == 0 || t[0] != '{' {
		return Invalid(field, "%s must be a JSON object", field)
	}
	return nil
}

// validText checks that s is UTF-8 text without NUL of minLen to maxLen characters.
func validText(field, s string, minLen, maxLen int) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "%s is not valid UTF-8", field)
	}
	if strings.ContainsRune(s, 0) {
		return Invalid(field, "%s must not contain NUL characters", field)
	}
	n := runes(s)
	if n < minLen || n > maxLen {
		if minLen > 0 {
			return Invalid(field, "%s must be %d-%d characters, got %d", field, minLen, maxLen, n)
		}
		return Invalid(field, "%s must be at most %d characters, got %d", field, maxLen, n)
	}
	return nil
}

// validLine refuses control characters (newlines, tabs, terminal escapes) in
// s: an identifier someone types or a label printed on one line.
func validLine(field, s string) error {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return Invalid(field, "%s must not contain control characters (newlines, tabs, escapes)", field)
	}
	return nil
}

// validNewLines refuses control characters in the tags and option ids and
// labels of new input. Versions before this rule stored them, so it is not
// a limit of what is stored: an archive holding them imports
// (CreateCheckpointInput.ValidateStored) and filters find them (ValidateTags).
func validNewLines(tags []string, h *HITLInput) error {
	for i, t := range tags {
		if err := validLine(fmt.Sprintf("tags[%d]", i), t); err != nil {
			return err
		}
	}
	if h == nil {
		return nil
	}
	for i, o := range h.Options {
		f := fmt.Sprintf("hitl.options[%d]", i)
		if err := validLine(f+".id", o.ID); err != nil {
			return err
		}
		if err := validLine(f+".label", o.Label); err != nil {
			return err
		}
	}
	return nil
}

// ValidateTags checks the count and length of tags, as every stored tag
// obeys; filters take any such tag. New tags are also one line (Validate).
func ValidateTags(field string, tags []string) error {
	if len(tags) > MaxTags {
		return Invalid(field, "at most %d tags are allowed, got %d", MaxTags, len(tags))
	}
	for i, t := range tags {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := validText(f, t, 1, MaxTagLen); err != nil {
			return err
		}
		// A comma separates tags in query strings (?tags=a,b).
		if strings.Contains(t, ",") {
			return Invalid(f, "a tag must not contain a comma, got %q", t)
		}
	}
	return nil
}

// Validate checks a checkpoint request against the field limits. It does not
// change anything; core applies defaults after it passes.
func (in *CreateCheckpointInput) Validate() error {
	if err := in.ValidateStored(); err != nil {
		return err
	}
	// A name is typed to find the checkpoint, and lists print it on one
	// line; older versions stored names with tabs.
	if err := validLine("name", in.Name); err != nil {
		return err
	}
	if err := in.validExpiry(); err != nil {
		return err
	}
	return validNewLines(in.Tags, in.HITL)
}

// validExpiry refuses a request the expiry of its checkpoint could not
// decide as a person could: past expiresAt no one may decide it, so the
// expiry rejects it unless its timeout approves or rejects, and a rejection
// needs an option with the reject action. (Requests stored before this rule
// are rejected at their expiry with no option chosen.)
func (in *CreateCheckpointInput) validExpiry() error {
	h := in.HITL
	if in.ExpiresAt == nil || h == nil || !h.Required || len(h.Options) == 0 {
		return nil
	}
	if t := h.Timeout; t != nil && (t.DefaultAction == ActionApprove || t.DefaultAction == ActionReject) {
		return nil // validateStored requires an option with the timeout's action
	}
	if slices.ContainsFunc(h.Options, func(o HITLOption) bool { return o.Action == ActionReject }) {
		return nil
	}
	return Invalid("expiresAt", "no one may decide a request after its checkpoint's expiresAt, so the expiry rejects it, and no option has the action reject: offer one, give the request a timeout whose default action is approve, or drop expiresAt")
}

// ValidateStored checks the limits every stored checkpoint obeys, including
// one an older version saved: an archive's checkpoints are checked so.
// Validate adds the rules new input obeys since.
func (in *CreateCheckpointInput) ValidateStored() error {
	if err := ValidateTime("expiresAt", in.ExpiresAt); err != nil {
		return err
	}
	if in.SessionID != "" {
		if err := ValidateID("sessionId", in.SessionID); err != nil {
			return err
		}
	}
	if in.ProjectPath != "" {
		if err := ValidateProjectPath("projectPath", in.ProjectPath); err != nil {
			return err
		}
	} else if in.SessionID == "" {
		return Invalid("projectPath", "projectPath is required when sessionId is not given")
	}
	if err := validText("summary", in.Summary, 1, MaxSummary); err != nil {
		return err
	}
	if err := validText("description", in.Description, 0, MaxDescription); err != nil {
		return err
	}
	if err := validText("name", in.Name, 0, MaxNameLen); err != nil {
		return err
	}
	if err := validText("phase", in.Phase, 0, MaxNameLen); err != nil {
		return err
	}
	if in.WorkspaceRef != "" && !isCommitID(in.WorkspaceRef) {
		return Invalid("workspaceRef", "workspaceRef must be a git commit id: 4 to 40 hexadecimal digits, or 64; got %q", Clip(in.WorkspaceRef, 50))
	}
	if in.Type != "" && !in.Type.Valid() {
		return Invalid("type", "type must be one of auto, phase, hitl, error, manual; got %q", Clip(string(in.Type), 50))
	}
	if in.Trigger != "" && !in.Trigger.Valid() {
		return Invalid("trigger", "trigger must be one of periodic, phase_change, subtask_complete, validation_fail, cost_threshold, user_request; got %q", Clip(string(in.Trigger), 50))
	}
	if in.Step < 0 {
		return Invalid("step", "step must not be negative")
	}
	if err := ValidateJSON("agentState", in.AgentState); err != nil {
		return err
	}
	if err := ValidateJSON("outputs", in.Outputs); err != nil {
		return err
	}
	if err := validObject("metadata", in.Metadata); err != nil {
		return err
	}
	if len(in.Context) > MaxContextPairs {
		return Invalid("context", "context may hold at most %d pairs, got %d", MaxContextPairs, len(in.Context))
	}
	for k, v := range in.Context {
		if err := validText("context", k, 1, MaxContextKey); err != nil {
			return Invalid("context", "context key %q must be 1-%d characters", Clip(k, 60), MaxContextKey)
		}
		if err := validText("context."+k, v, 0, MaxContextValue); err != nil {
			return err
		}
	}
	if err := ValidateTags("tags", in.Tags); err != nil {
		return err
	}
	if err := in.validateSnapshot(); err != nil {
		return err
	}
	if in.Snapshot && len(in.Events) > 0 {
		return Invalid("events", "events are not carried by a checkpoint with a snapshot: append them with AppendEvents")
	}
	if err := in.validateLife(); err != nil {
		return err
	}
	if err := ValidateEvents("events", in.Events, true); err != nil {
		return err
	}
	if in.HITL != nil {
		return in.HITL.validateStored()
	}
	return nil
}

// validateLife checks what the checkpoint does to the session's life: the
// lease it is saved under, released or not, the end, and the requests it
// answers.
func (in *CreateCheckpointInput) validateLife() error {
	switch {
	case (in.Holder != "" || in.Release || in.End != "") && in.Snapshot:
		return Invalid("snapshot", "a checkpoint with a snapshot takes no holder, release or end: heartbeat and end the session apart")
	case in.SessionID == "" && (in.Holder != "" || in.Release || in.End != ""):
		return Invalid("sessionId", "holder, release and end need the session named")
	case in.Release && in.Holder == "":
		return Invalid("release", "release gives up a holder's lease: name the holder")
	case in.Release && in.End != "":
		return Invalid("release", "give release or end, not both: ending the session releases its lease")
	case in.End != "" && in.End != SessionCompleted && in.End != SessionFailed && in.End != SessionAbandoned:
		return Invalid("end", "a session ends completed, failed or abandoned, not %q", Clip(string(in.End), 40))
	case in.EndReason != "" && in.End == "":
		return Invalid("endReason", "endReason goes with end")
	case len(in.Answers) > 0 && (in.Snapshot || in.SessionID == ""):
		return Invalid("answers", "answers need the session named, and no snapshot")
	case len(in.Answers) > MaxAnswers:
		return Invalid("answers", "give at most %d answers, got %d", MaxAnswers, len(in.Answers))
	}
	if err := ValidateEndReason("endReason", in.EndReason); err != nil {
		return err
	}
	for i := range in.Answers {
		if err := in.Answers[i].Validate(); err != nil {
			return err
		}
	}
	return validText("holder", in.Holder, 0, MaxNameLen)
}

// validateSnapshot checks the snapshot request: touched paths must stay
// inside the workspace, the file size cap within bounds.
func (in *CreateCheckpointInput) validateSnapshot() error {
	if in.MaxFileSize < 0 || in.MaxFileSize > MaxFileSizeLimit {
		return Invalid("maxFileSize", "maxFileSize must be between 1 and %d bytes (1 GiB), got %d", int64(MaxFileSizeLimit), in.MaxFileSize)
	}
	if !in.Snapshot {
		if len(in.Paths) > 0 {
			return Invalid("paths", "paths are only allowed with snapshot")
		}
		if in.MaxFileSize != 0 {
			return Invalid("maxFileSize", "maxFileSize is only allowed with snapshot")
		}
		return nil
	}
	if in.WorkspaceRef != "" {
		return Invalid("workspaceRef", "workspaceRef and snapshot exclude each other: the snapshot sets workspaceRef")
	}
	if len(in.Paths) > MaxPaths {
		return Invalid("paths", "at most %d paths are allowed, got %d", MaxPaths, len(in.Paths))
	}
	for i, p := range in.Paths {
		if err := ValidateRelativePath(fmt.Sprintf("paths[%d]", i), p); err != nil {
			return err
		}
	}
	return nil
}

// ValidateRelativePath checks that p names a path inside a workspace:
// relative, without NUL bytes and not climbing out with "..".
func ValidateRelativePath(field, p string) error {
	switch {
	case p == "":
		return Invalid(field, "%s must not be empty", field)
	case len(p) > MaxPathLen:
		return Invalid(field, "%s is longer than %d bytes", field, MaxPathLen)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return Invalid(field, "%s must be UTF-8 without NUL bytes", field)
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return Invalid(field, "%s must be relative to the workspace, got %q", field, Clip(p, 200))
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return Invalid(field, "%s must stay inside the workspace, got %q", field, Clip(p, 200))
	}
	return nil
}

// Validate checks a rollback request.
func (in *RestoreInput) Validate() error {
	if err := ValidateID("checkpointId", in.CheckpointID); err != nil {
		return err
	}
	return validText("reason", in.Reason, 0, MaxReason)
}

// Validate checks a diff request.
func (in *DiffInput) Validate() error {
	if err := ValidateID("checkpointId", in.CheckpointID); err != nil {
		return err
	}
	if in.To != "" && in.To != DiffCurrent {
		return ValidateID("to", in.To)
	}
	return nil
}

// Validate checks an integrity check request.
func (in *ValidateInput) Validate() error {
	if in.SessionID != "" {
		return ValidateID("sessionId", in.SessionID)
	}
	return nil
}

// Validate checks a resume request: the holder, the lease, and the project
// whose newest interrupted session to resume, when named, an absolute path
// (a relative one would name no project's sessions, whatever directory the
// caller means).
func (in *ResumeInput) Validate() error {
	if err := ValidateHolder("holder", in.Holder); err != nil {
		return err
	}
	if err := ValidateLease("lease", in.Lease); err != nil {
		return err
	}
	if in.SessionID != "" {
		if err := ValidateID("sessionId", in.SessionID); err != nil {
			return err
		}
	}
	if in.ProjectPath != "" {
		return ValidateProjectPath("projectPath", in.ProjectPath)
	}
	return nil
}

// Validate checks a lease request: the session, the holder and the lease.
func (in *LeaseInput) Validate() error {
	if err := ValidateID("sessionId", in.SessionID); err != nil {
		return err
	}
	if err := ValidateHolder("holder", in.Holder); err != nil {
		return err
	}
	if err := ValidateLease("lease", in.Lease); err != nil {
		return err
	}
	if len(in.Events) > 0 && !in.Release {
		return Invalid("events", "events ride only with a release")
	}
	return ValidateEvents("events", in.Events, false)
}

// Validate checks a request to end a session: completed, failed or
// abandoned, with a reason of at most MaxEndReason bytes.
func (in *EndSessionInput) Validate() error {
	if err := ValidateID("sessionId", in.SessionID); err != nil {
		return err
	}
	switch in.Status {
	case SessionCompleted, SessionFailed, SessionAbandoned:
	default:
		return Invalid("status", "a session ends completed, failed or abandoned, not %q", Clip(string(in.Status), 40))
	}
	if err := ValidateEndReason("reason", in.Reason); err != nil {
		return err
	}
	return ValidateEvents("events", in.Events, false)
}

// Validate checks an import request.
func (in *ImportInput) Validate() error {
	if in.ProjectPath != "" {
		return ValidateProjectPath("projectPath", in.ProjectPath)
	}
	return nil
}

// Validate checks a branch export request: the branch name follows git's
// rules for branch names (git check-ref-format --branch) and does not read as
// another ref.
func (in *ExportBranchInput) Validate() error {
	if err := ValidateID("sessionId", in.SessionID); err != nil {
		return err
	}
	if err := validText("branch", in.Branch, 0, MaxNameLen); err != nil {
		return err
	}
	if in.Branch == "" {
		return nil
	}
	if why := branchNameProblem(in.Branch); why != "" {
		return Invalid("branch", "branch %q is not a valid git branch name: %s", Clip(in.Branch, 60), why)
	}
	return nil
}

// branchNameProblem says why name is not a usable branch name, or "". These
// are git's rules for a ref name (git help check-ref-format), plus the names
// git check-ref-format --branch refuses (HEAD, a leading dash) and names that
// would make refs/heads/<name> ambiguous with another ref (@, refs/...).
func branchNameProblem(name string) string {
	switch {
	case name == "HEAD" || name == "@":
		return "it names HEAD, not a branch"
	case strings.HasPrefix(name, "refs/"):
		return "give the name without refs/heads/"
	case strings.HasPrefix(name, "-"):
		return "it starts with a dash"
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "it has an empty part between slashes"
	case strings.HasSuffix(name, "."):
		return "it ends with a dot"
	case strings.Contains(name, ".."):
		return `it contains ".."`
	case strings.Contains(name, "@{"):
		return `it contains "@{"`
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Sprintf("it contains %q", r)
		}
	}
	for part := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return fmt.Sprintf("a part starts with a dot or ends with .lock (%q)", part)
		}
	}
	return ""
}

// Validate checks a HITL request against seed 000's limits, its option ids
// and labels each one line.
func (h *HITLInput) Validate() error {
	if err := h.validateStored(); err != nil {
		return err
	}
	return validNewLines(nil, h)
}

// validateStored checks the limits every stored request obeys (see
// CreateCheckpointInput.ValidateStored).
func (h *HITLInput) validateStored() error {
	if err := validText("hitl.title", h.Title, 0, MaxHITLTitle); err != nil {
		return err
	}
	if err := validText("hitl.message", h.Message, 0, MaxHITLMessage); err != nil {
		return err
	}
	if h.Options != nil && len(h.Options) == 0 {
		return Invalid("hitl.options", "hitl.options must hold 1-%d options when given", MaxHITLOptions)
	}
	if len(h.Options) > MaxHITLOptions {
		return Invalid("hitl.options", "hitl.options may hold at most %d options, got %d", MaxHITLOptions, len(h.Options))
	}
	seen := make(map[string]bool, len(h.Options))
	defaults := 0
	for i, o := range h.Options {
		f := fmt.Sprintf("hitl.options[%d]", i)
		if err := validText(f+".id", o.ID, 1, MaxOptionIDLen); err != nil {
			return err
		}
		if seen[o.ID] {
			return Invalid(f+".id", "option id %q is used twice", o.ID)
		}
		seen[o.ID] = true
		if err := validText(f+".label", o.Label, 1, MaxOptionLabel); err != nil {
			return err
		}
		if err := validText(f+".description", o.Description, 0, MaxOptionDesc); err != nil {
			return err
		}
		if !o.Action.Valid() {
			return Invalid(f+".action", "action must be one of approve, reject, modify, retry, skip, escalate; got %q", Clip(string(o.Action), 50))
		}
		if o.IsDefault {
			defaults++
		}
	}
	if defaults > 1 {
		return Invalid("hitl.options", "at most one option may be the default, got %d", defaults)
	}
	if err := validObject("hitl.context", h.Context); err != nil {
		return err
	}
	if t := h.Timeout; t != nil {
		if t.Duration < MinTimeoutSeconds || t.Duration > MaxTimeoutSeconds {
			return Invalid("hitl.timeout.duration", "timeout duration must be %d-%d seconds, got %d", MinTimeoutSeconds, MaxTimeoutSeconds, t.Duration)
		}
		switch t.DefaultAction {
		case ActionApprove, ActionReject, ActionPause:
		default:
			return Invalid("hitl.timeout.defaultAction", "defaultAction must be approve, reject or pause; got %q", Clip(string(t.DefaultAction), 50))
		}
		// The timeout decides as a person could: by an option offered.
		offered := func(o HITLOption) bool { return o.Action == t.DefaultAction }
		if t.DefaultAction != ActionPause && len(h.Options) > 0 && !slices.ContainsFunc(h.Options, offered) {
			return Invalid("hitl.timeout.defaultAction", "no option has the action %s, so the timeout could not decide it: offer one, or make the default another option's action (or pause)", t.DefaultAction)
		}
	}
	if len(h.Approvers) > MaxApprovers {
		return Invalid("hitl.approvers", "at most %d approvers are allowed", MaxApprovers)
	}
	for i, a := range h.Approvers {
		if err := validText(fmt.Sprintf("hitl.approvers[%d]", i), a, 1, MaxNameLen); err != nil {
			return err
		}
	}
	switch h.OnReject {
	case "", OnRejectFail, OnRejectContinue:
	default:
		return Invalid("hitl.onReject", "onReject must be fail or continue; got %q", Clip(h.OnReject, 50))
	}
	return nil
}

// Validate checks a list request. Zero values mean defaults.
func (in *ListCheckpointsInput) Validate() error {
	if err := ValidateTime("createdAfter", in.CreatedAfter); err != nil {
		return err
	}
	if err := ValidateTime("createdBefore", in.CreatedBefore); err != nil {
		return err
	}
	if in.SessionID != "" {
		if err := ValidateID("sessionId", in.SessionID); err != nil {
			return err
		}
	}
	if in.Type != "" && !in.Type.Valid() {
		return Invalid("type", "type must be one of auto, phase, hitl, error, manual; got %q", Clip(string(in.Type), 50))
	}
	if in.Limit < 0 || in.Limit > MaxListLimit {
		return Invalid("limit", "limit must be 1-%d, got %d", MaxListLimit, in.Limit)
	}
	if in.Offset < 0 || in.Offset > MaxOffset {
		return Invalid("offset", "offset must be 0-%d, got %d", MaxOffset, in.Offset)
	}
	if in.Offset > 0 && in.Cursor != "" {
		return Invalid("offset", "page with a cursor or an offset, not both")
	}
	switch in.OrderBy {
	case "", OrderCreatedAt, OrderType, OrderUpdatedAt:
	default:
		return Invalid("orderBy", "orderBy must be createdAt, updatedAt or type; got %q", Clip(in.OrderBy, 50))
	}
	switch in.OrderDir {
	case "", OrderAsc, OrderDesc:
	default:
		return Invalid("orderDir", "orderDir must be asc or desc; got %q", Clip(in.OrderDir, 50))
	}
	if in.CreatedAfter != nil && in.CreatedBefore != nil && !in.CreatedAfter.Before(*in.CreatedBefore) {
		return Invalid("createdAfter", "createdAfter must be before createdBefore")
	}
	if in.ProjectPath != "" {
		if err := ValidateProjectPath("projectPath", in.ProjectPath); err != nil {
			return err
		}
	}
	return ValidateTags("tags", in.Tags)
}

// Validate checks a session request.
func (in *CreateSessionInput) Validate() error {
	if in.ProjectPath != "" {
		if err := ValidateProjectPath("projectPath", in.ProjectPath); err != nil {
			return err
		}
	}
	if err := validText("title", in.Title, 0, MaxSummary); err != nil {
		return err
	}
	if err := validText("phase", in.Phase, 0, MaxNameLen); err != nil {
		return err
	}
	if err := validObject("metadata", in.Metadata); err != nil {
		return err
	}
	if in.Holder == "" && in.Lease == 0 {
		return nil
	}
	if err := ValidateHolder("holder", in.Holder); err != nil {
		return err
	}
	return ValidateLease("lease", in.Lease)
}

// Validate checks a session update: at least one field, within its limits.
func (in *UpdateSessionInput) Validate() error {
	if in.Title == nil {
		return Invalid("title", "nothing to update: give a title")
	}
	return validText("title", *in.Title, 0, MaxSummary)
}

// Validate checks a session list request.
func (in *ListSessionsInput) Validate() error {
	if in.Status != "" && !in.Status.Valid() {
		return Invalid("status", "status %q is not a session status", Clip(string(in.Status), 50))
	}
	if in.Limit < 0 || in.Limit > MaxListLimit {
		return Invalid("limit", "limit must be 1-%d, got %d", MaxListLimit, in.Limit)
	}
	if in.ProjectPath != "" {
		return ValidateProjectPath("projectPath", in.ProjectPath)
	}
	return nil
}

// Validate checks a decision's shape; whether the option exists is core's to check.
func (in *DecideInput) Validate() error {
	if err := ValidateID("checkpointId", in.CheckpointID); err != nil {
		return err
	}
	if in.Action != "" && !in.Action.Valid() {
		return Invalid("action", "action must be one of approve, reject, modify, retry, skip, escalate; got %q", Clip(string(in.Action), 50))
	}
	if err := validText("selectedOption", in.SelectedOption, 1, MaxOptionIDLen); err != nil {
		return err
	}
	if err := validText("feedback", in.Feedback, 0, MaxFeedback); err != nil {
		return err
	}
	if len(in.Modifications) > 0 && in.Action != "" && in.Action != ActionModify {
		return Invalid("modifications", "modifications are only allowed with action modify")
	}
	if err := validObject("modifications", in.Modifications); err != nil {
		return err
	}
	return validText("idempotencyKey", in.IdempotencyKey, 0, MaxNameLen)
}
