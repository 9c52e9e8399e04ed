// Package store defines what belay asks of a database. A driver (store/sqlite,
// later store/postgres) only persists: it offers the atomic operations the
// rules in core need and holds no rules itself. Every driver passes the one
// conformance suite in store/storetest.
package store

import (
	"context"
	"time"

	"github.com/belayhq/belay"
)

// Store is a handle on one belay database.
type Store interface {
	Reader
	// Update runs fn in one write transaction. When fn returns an error, or the
	// process dies before Update returns, nothing fn wrote is kept.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// Close releases the database.
	Close() error
}

// StatePreparer is a Store that can do the costly part of storing an agent
// state (compressing it, or cutting a large one into chunks and compressing
// them) before the write transaction, beside other writers.
type StatePreparer interface {
	// PrepareState returns ctx carrying state prepared: a transaction's
	// InsertCheckpoint of that very state (the same bytes, not a copy),
	// given the returned context, stores it without that work. When
	// preparing fails (a read), ctx is returned as it was, and the
	// transaction does the work.
	PrepareState(ctx context.Context, state []byte) context.Context
}

// Batcher is a Store that can spare a write the cost of being undone alone,
// when its fn may run more than once.
type Batcher interface {
	// Batch runs fn as Update does, but fn may run more than once, each time
	// after the writes of the runs before were undone: it must act only
	// through tx, and assign anew on each run whatever it reports.
	Batch(ctx context.Context, fn func(tx Tx) error) error
}

// Notifier is what a store offers when processes sharing its database can
// hear of each other's commits at once (PostgreSQL's LISTEN/NOTIFY): the
// store announces every committed Update itself, as part of the commit. It
// only wakes: listeners then read the event log, which stays the source of
// truth, and keep polling as a fallback. A store without it is polled.
type Notifier interface {
	// Listen returns a channel that receives after a commit of an Update
	// anywhere, in any process, and a cancel that stops it.
	Listen() (<-chan struct{}, func())
}

// CheckSchema refuses a database whose schema version (found) is newer than
// the newest this build knows (known): a newer belay migrated it, and this
// one would misread or damage what it does not know. The error is
// SCHEMA_TOO_NEW and names both versions.
func CheckSchema(what string, found, known int64) error {
	if found <= known {
		return nil
	}
	return belay.Errorf(belay.CodeSchemaTooNew,
		"%s has schema version %d, newer than version %d that this belay knows: upgrade belay before starting it on this database",
		what, found, known).With("schemaVersion", found).With("knownVersion", known)
}

// CheckpointSeqNotFound is the error of GetCheckpointBySeq when the session
// has no checkpoint seq: CHECKPOINT_NOT_FOUND with the session and the seq in
// its details, as core reports a seq of a session that does not exist.
func CheckpointSeqNotFound(sessionID string, seq int64) error {
	return belay.Errorf(belay.CodeCheckpointNotFound, "checkpoint #%d of session %s not found", seq, sessionID).
		With("sessionId", sessionID).With("seq", seq)
}

// Sizer is implemented by a store that can tell how much space its files use.
type Sizer interface {
	Size(ctx context.Context) (int64, error)
}

// Reader holds the queries. Not-found results are *belay.Error with
// SESSION_NOT_FOUND or CHECKPOINT_NOT_FOUND (NOT_FOUND for other records).
type Reader interface {
	GetSession(ctx context.Context, id string) (*belay.Session, error)
	// GetSessionHead returns session id with only the fields a checkpoint's
	// save reads: ID, ProjectPath, Owner, Status, Phase, CurrentStep,
	// HeadCheckpointID, LastSeq, CheckpointCount, Holder and LeaseExpiresAt;
	// the others are zero (State, Metadata and Plan nil). Inside a
	// transaction, other writers to the session wait for the commit, as
	// after GetSession. Such a session is stored back with AdvanceSession,
	// never with UpdateSession.
	GetSessionHead(ctx context.Context, id string) (*belay.Session, error)
	// ActiveSession returns the newest open session (see SessionStatus.Open) of
	// a project path within scope. Inside a transaction it is a save's
	// lookup: other writers to the session returned wait for the commit, as
	// after GetSession, and so does another transaction's ActiveSession of
	// the same project path, found or not. So of concurrent transactions
	// that look a project's active session up and create one when there is
	// none, exactly one creates it, and each numbers its checkpoints after
	// those committed before it.
	ActiveSession(ctx context.Context, projectPath string, scope Scope) (*belay.Session, error)
	// ListSessions returns one page of sessions, newest first: up to
	// q.Limit, ending early at q.MaxBytes. more reports whether sessions
	// follow the page, total how many match in all (ignoring q.After).
	ListSessions(ctx context.Context, q SessionQuery) (page []*belay.Session, total int64, more bool, err error)

	GetCheckpoint(ctx context.Context, id string) (*belay.Checkpoint, error)
	GetCheckpointBySeq(ctx context.Context, sessionID string, seq int64) (*belay.Checkpoint, error)
	// ListCheckpoints returns one page of checkpoints after q.After in the
	// query's order: up to q.Limit, ending early at q.MaxBytes. more reports
	// whether checkpoints follow the page, total how many match the filters
	// in all (ignoring q.After).
	ListCheckpoints(ctx context.Context, q CheckpointQuery) (page []*belay.Checkpoint, total int64, more bool, err error)
	// PendingHITL returns checkpoints whose HITL request has no decision yet, oldest first.
	PendingHITL(ctx context.Context, q PendingQuery) (page []*belay.Checkpoint, more bool, err error)
	// DueHITL returns undecided HITL checkpoints with a deadline at or
	// before now — a timeout that has not fired yet, or the checkpoint's
	// expiry (also after its timeout fired) — earliest deadline first.
	// Inside a transaction a driver locks them with their sessions, so
	// concurrent callers do not get the same rows, and passes over a request
	// whose session another transaction holds (the session first: every
	// writer takes a session before its requests, see DecideIfPending, and a
	// caller holding a request while it waited for the session could wait
	// for one that waits for the request).
	DueHITL(ctx context.Context, now time.Time, limit int) ([]*belay.Checkpoint, error)
	// DueLeases returns open sessions whose lease expired at or before now,
	// oldest first.
	DueLeases(ctx context.Context, now time.Time, limit int) ([]*belay.Session, error)
	// NextHITLDeadline returns the earliest deadline of an undecided HITL
	// checkpoint, if any: a timeout that has not fired, or the checkpoint's
	// expiry.
	NextHITLDeadline(ctx context.Context) (time.Time, bool, error)

	// FindCheckpointIDs returns up to limit ids of checkpoints within scope
	// that begin with prefix, in id order.
	FindCheckpointIDs(ctx context.Context, prefix string, scope Scope, limit int) ([]string, error)
	// SessionGrants returns the grants of a session, oldest first.
	SessionGrants(ctx context.Context, sessionID string) ([]*belay.Grant, error)

	// ListEvents returns events with Seq > q.After in Seq order.
	ListEvents(ctx context.Context, q EventQuery) ([]belay.Event, error)
	// LastEventSeq returns the newest event's Seq, 0 when there are none.
	LastEventSeq(ctx context.Context) (int64, error)

	ListRollbacks(ctx context.Context, sessionID string) ([]*belay.Rollback, error)

	GetUser(ctx context.Context, name string) (*belay.User, error)
	// TokenByHash returns the token with the given hash and its user; a
	// revoked token is returned too (RevokedAt set).
	TokenByHash(ctx context.Context, tokenHash string) (*belay.Token, *belay.User, error)
	// GetToken returns token id (NOT_FOUND when there is none).
	GetToken(ctx context.Context, id string) (*belay.Token, error)
	// ListTokens returns every token, newest first.
	ListTokens(ctx context.Context) ([]*belay.Token, error)
	CountUsers(ctx context.Context) (int64, error)

	ListRetention(ctx context.Context) ([]belay.RetentionPolicy, error)

	ListWebhooks(ctx context.Context) ([]*belay.Webhook, error)
	ListDeliveries(ctx context.Context, q DeliveryQuery) ([]*belay.Delivery, error)
	// LastDelivery returns the recorded attempt with the highest number to
	// deliver event seq to webhook webhookID, or nil when none was recorded.
	LastDelivery(ctx context.Context, webhookID string, seq int64) (*belay.Delivery, error)

	// SearchCheckpoints ranks the checkpoints within q.Scope, q.ProjectPath
	// and q.Tags twice: by full-text relevance to q.Text, and by cosine
	// similarity of their vectors of q.Model to q.Vector. It returns the
	// union of the two rankings' first q.Limit, in no order.
	SearchCheckpoints(ctx context.Context, q SearchQuery) ([]SearchHit, error)
	// DueEmbeddings returns up to limit checkpoints waiting to be embedded
	// whose next attempt is due at now, the longest waiting first.
	DueEmbeddings(ctx context.Context, now time.Time, limit int) ([]EmbeddingJob, error)
	// SearchIndex reports the search index's model and counts.
	SearchIndex(ctx context.Context) (IndexState, error)
	// SignedOut reports whether dashboard sign-in id was signed out.
	SignedOut(ctx context.Context, id string) (bool, error)

	// StateChunks counts the stored chunks of large agent states, each once
	// however many states share it.
	StateChunks(ctx context.Context) (ChunkUsage, error)
	// CheckpointUsage counts a session's checkpoints and the bytes of their
	// agent states, outputs and metadata, a large state at the length it has
	// whole, as its root declares: no state is read back from its chunks.
	CheckpointUsage(ctx context.Context, sessionID string) (CheckpointUsage, error)
}

// Tx is a write transaction. Reads inside it see its own writes.
type Tx interface {
	Reader
	InsertSession(ctx context.Context, s *belay.Session) error
	// UpdateSession overwrites the mutable fields of an existing session:
	// all but its ID, ProjectPath, Owner and CreatedAt.
	UpdateSession(ctx context.Context, s *belay.Session) error
	// AdvanceSession stores what a checkpoint's save changes in an existing
	// session: its Status, Phase, CurrentStep, HeadCheckpointID, LastSeq,
	// CheckpointCount and UpdatedAt, and its State unless s.State is nil
	// (then the stored state stays). The other fields keep their stored
	// values, whatever s holds.
	AdvanceSession(ctx context.Context, s *belay.Session) error
	DeleteSession(ctx context.Context, id string) error

	InsertCheckpoint(ctx context.Context, c *belay.Checkpoint) error
	DeleteCheckpoint(ctx context.Context, id string) error
	// DecideIfPending stores d as the decision of checkpoint id when it has
	// none yet (its UpdatedAt becoming d.DecidedAt), and reports whether it did. Exactly one of any number of
	// concurrent callers gets true. A caller reads the checkpoint's session
	// (GetSession) first, here and before MarkTimeoutFired: writers that
	// take a session and its requests in this one order never wait for each
	// other in a circle.
	DecideIfPending(ctx context.Context, id string, d *belay.Decision) (bool, error)
	// MarkTimeoutFired records that the checkpoint's timeout was applied, when
	// it was not yet and the request is undecided, and reports whether it
	// did: a request a person decided meanwhile has no timeout to apply.
	MarkTimeoutFired(ctx context.Context, id string) (bool, error)

	// AppendEvent stores e and sets e.Seq to the next global sequence number.
	AppendEvent(ctx context.Context, e *belay.Event) error

	InsertRollback(ctx context.Context, r *belay.Rollback) error

	PutUser(ctx context.Context, u *belay.User) error
	// InsertToken stores a token under the hash of its secret.
	InsertToken(ctx context.Context, t *belay.Token, tokenHash string) error
	// RevokeToken marks a token revoked at the given time, once.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// TouchToken records that a token was used at the given time.
	TouchToken(ctx context.Context, id string, at time.Time) error

	// PutGrant stores a grant, replacing the user's previous one in the session.
	PutGrant(ctx context.Context, g *belay.Grant) error
	// DeleteGrant removes a user's grant in a session.
	DeleteGrant(ctx context.Context, sessionID, user string) error

	// PutRetention stores a project's policy, replacing the previous one.
	PutRetention(ctx context.Context, p belay.RetentionPolicy) error
	// DeleteRetention removes a project's policy; a missing one is fine.
	DeleteRetention(ctx context.Context, projectPath string) error

	// InitSetting stores value under name unless a value is there already,
	// and returns the value stored: of instances racing to set one, all get
	// the first's.
	InitSetting(ctx context.Context, name string, value []byte) ([]byte, error)
	// PutSetting stores value under name, replacing any value there.
	PutSetting(ctx context.Context, name string, value []byte) error
	// AddSignout records that dashboard sign-in id was signed out; it
	// would have ended at until. Records of sign-ins ended by now go.
	AddSignout(ctx context.Context, id string, until, now time.Time) error

	InsertWebhook(ctx context.Context, w *belay.Webhook) error
	DeleteWebhook(ctx context.Context, id string) error
	InsertDelivery(ctx context.Context, d *belay.Delivery) error
	// AdvanceWebhook moves a webhook's delivery position to seq.
	AdvanceWebhook(ctx context.Context, id string, seq int64) error
	// ClaimWebhook takes or renews the lease on delivering webhook id's
	// events for holder until the given time, and reports whether holder
	// now holds it. A holder may always renew its own lease; another takes
	// it only when it is free or its until is at or before now. A missing
	// webhook is not claimed (false, no error).
	ClaimWebhook(ctx context.Context, id, holder string, now, until time.Time) (bool, error)

	// A checkpoint is searchable by text from the transaction that inserts
	// it, and waits to be embedded from then on; deleting it removes it
	// from the index and the queue.

	// PutEmbedding stores checkpoint id's vector (replacing any) and takes
	// it off the embedding queue; a checkpoint deleted meanwhile is no error.
	// A vector of another model than the index's (see QueueEmbeddings), or
	// of another length, is dropped: the index moved on, the checkpoint
	// stays queued.
	PutEmbedding(ctx context.Context, id string, e Embedding) error
	// ClaimEmbeddings takes up to limit checkpoints waiting to be embedded
	// whose next attempt is due at now, the longest waiting first, and moves
	// their next attempt to until, so that no other instance takes them
	// meanwhile (on a shared database, rows another transaction is claiming
	// are skipped, not waited for). PutEmbedding or RetryEmbedding settles
	// each; one never settled (its instance died) falls due again at until.
	ClaimEmbeddings(ctx context.Context, now, until time.Time, limit int) ([]EmbeddingJob, error)
	// RetryEmbedding records a failed attempt to embed checkpoint id: it
	// stays queued, due again at next.
	RetryEmbedding(ctx context.Context, id string, attempts int, next time.Time, reason string) error
	// QueueEmbeddings records m as the index's model and queues every
	// checkpoint without a vector of m (every checkpoint with all). It
	// returns how many wait now.
	QueueEmbeddings(ctx context.Context, m IndexModel, all bool, now time.Time) (int64, error)
	// SetTokenCount records a checkpoint's token count, derived data that
	// checkpoints saved before it was counted lack.
	SetTokenCount(ctx context.Context, id string, count int, encoding string) error

	// A state larger than chunkstore.InlineMax is stored as content-addressed
	// chunks, shared by every checkpoint and session whose state contains
	// them, and read back whole, each chunk checked against its hash (a
	// mismatch or a missing chunk is CHECKPOINT_CORRUPTED); a smaller one is
	// kept in its row, compressed when that pays (see chunkstore.Save).
	// Deleting a checkpoint or session leaves its chunks until a sweep.

	// SweepStateChunks deletes the chunks no checkpoint or session refers
	// to any more, or with dryRun only counts them, and returns how many
	// chunks and bytes that is. A save running beside it never loses a
	// chunk: it commits either before the sweep looks (and its chunks stay)
	// or after the sweep (and stores again what the sweep deleted).
	SweepStateChunks(ctx context.Context, dryRun bool) (ChunkUsage, error)
}

// ChunkUsage counts chunks of large agent states and their bytes.
type ChunkUsage struct {
	Chunks int64
	Bytes  int64
}

// CheckpointUsage is what Reader.CheckpointUsage counts.
type CheckpointUsage struct {
	Checkpoints int64
	// StateBytes adds up the lengths of the agent states, outputs and metadata.
	StateBytes int64
}

// IndexModel names a vector space. Vectors of another Model, or of another
// length, are never compared with its. Dimensions 0 means the length the
// model's vectors turn out to have.
type IndexModel struct {
	Model      string
	Dimensions int
}

// Embedding is a checkpoint's vector, of unit length.
type Embedding struct {
	Model  string
	Vector []float32
}

// SearchQuery asks for search candidates.
type SearchQuery struct {
	Scope       Scope
	ProjectPath string
	Tags        []string
	// Text is the query as a person typed it: a driver makes it safe for
	// its full-text engine and never passes it raw, so no input is a
	// syntax error. A text without words ranks nothing.
	Text string
	// Vector, of Model, is compared with the vectors of Model and of its
	// length alone; nil ranks nothing.
	Vector []float32
	Model  string
	// Limit is how many candidates each ranking gives at most.
	Limit int
}

// SearchHit is one candidate of a search. A rank is 1-based; 0 means the
// ranking did not place it among its first Limit.
type SearchHit struct {
	CheckpointID string
	TextRank     int
	// TextScore is the full-text relevance (BM25), higher is better.
	TextScore  float64
	VectorRank int
	// Similarity is the cosine similarity with the query's vector when the
	// checkpoint has a vector of the query's model (HasVector), also when
	// only the text ranking placed it. The vector ranking places only
	// checkpoints more similar than 0.
	Similarity float64
	HasVector  bool
}

// EmbeddingJob is a checkpoint waiting to be embedded.
type EmbeddingJob struct {
	Checkpoint *belay.Checkpoint
	// Attempts is how many attempts failed so far.
	Attempts int
}

// IndexState is what the store knows of its search index.
type IndexState struct {
	IndexModel
	Checkpoints int64
	// Embedded counts checkpoints with a vector of the index's model.
	Embedded int64
	Queued   int64
	// Failing counts queued checkpoints whose last attempt failed;
	// LastError is the newest failure's reason.
	Failing   int64
	LastError string
}

// SessionKey is a position in the session order.
type SessionKey struct {
	CreatedAt time.Time
	ID        string
}

// Scope limits a query to what one caller may read: with All, everything;
// else the sessions User owns or holds a grant in, and (with Projects) only
// those whose project path is one of Projects or below one. Records of those
// sessions (checkpoints, events) follow their session; events that belong to
// no session are only for All. OwnOrAdmin keeps, of the rest, only the
// sessions User owns and those whose owner is no user without admin rights
// (an admin, the CLI's local user): those a save naming only its project may
// continue. A session of another user who is not an admin never receives the
// caller's saves that way: its owner would read them.
type Scope struct {
	All        bool
	User       string
	Projects   []string
	OwnOrAdmin bool
}

// Everything is the scope of belay's own background work and of admins.
var Everything = Scope{All: true}

// SessionQuery filters sessions; the order is newest first.
type SessionQuery struct {
	Scope       Scope
	ProjectPath string
	Status      belay.SessionStatus
	After       *SessionKey
	Limit       int
	// MaxBytes, when positive, ends the page early (see PageBudget): after
	// the session whose state and metadata bring it to MaxBytes or more.
	MaxBytes int64
}

// CheckpointKey is a position in a checkpoint order: Type matters only when
// ordering by type, UpdatedAt only when ordering by update (and CreatedAt
// then not).
type CheckpointKey struct {
	Type      belay.CheckpointType
	CreatedAt time.Time
	UpdatedAt time.Time
	// Seq is the position in a session's order (see CheckpointQuery).
	Seq int64
	ID  string
}

// CheckpointQuery filters checkpoints. Order is by (CreatedAt, ID), by
// (Type, CreatedAt, ID) or, with OrderByUpdated, by (UpdatedAt, ID),
// ascending or descending. The checkpoints of one session (SessionID set,
// neither OrderByType nor OrderByUpdated) come in the session's own order,
// by Seq, which After.Seq positions: the order they were saved in, which
// their CreatedAt may not follow when saves ran concurrently.
type CheckpointQuery struct {
	Scope         Scope
	SessionID     string
	Name          string
	Step          int
	ProjectPath   string
	Type          belay.CheckpointType
	HITLRequired  *bool
	HITLDecided   *bool
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
	Tags          []string
	OrderByType   bool
	// OrderByUpdated orders by UpdatedAt (OrderByType must be false).
	OrderByUpdated bool
	Desc           bool
	After          *CheckpointKey
	// Offset skips that many rows of the order.
	Offset int
	Limit  int
	// MaxBytes, when positive, ends the page early (see PageBudget): after
	// the checkpoint whose agent state, outputs and metadata bring it to
	// MaxBytes or more.
	MaxBytes int64
}

// PendingQuery filters pending HITL requests.
type PendingQuery struct {
	// Scope: requests in sessions within it, and requests that name
	// Scope.User among their approvers.
	Scope     Scope
	SessionID string
	// After pages on: only requests after this (CreatedAt, ID) position.
	After *CheckpointKey
	Limit int
	// MaxBytes, when positive, ends the page early, as CheckpointQuery's.
	MaxBytes int64
}

// EventQuery filters the event log.
type EventQuery struct {
	Scope Scope
	// Approvals adds to Scope's sessions the HITL events (HITLEventTypes)
	// whose data names Scope.User among the request's approvers, within
	// Scope.Projects: what an approver who may not read the session is
	// told of the requests it may decide.
	Approvals bool
	After     int64
	SessionID string
	Types     []string
	Limit     int
}

// HITLEventTypes are the events of a HITL request, whose data names its
// approvers (as "approvers", when it has any).
var HITLEventTypes = []string{belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLTimedOut}

// DeliveryQuery filters the webhook delivery log, newest first.
type DeliveryQuery struct {
	WebhookID string
	Limit     int
}
