// Package checkpointsvc is belay's checkpoint memory as an embedded Go API:
// the service of seed 003 (NewService, Create, Search, List, GetByID,
// Delete, Health) for a program that keeps its agent's checkpoints in its own
// process, without a server.
//
// It is a thin view of belay's core, not a second implementation: the same
// validation, sessions, search index and error codes as every transport.
// Checkpoints are immutable (their checksum covers what was saved), so there
// is no Update; what a person decides is recorded beside them.
package checkpointsvc

import (
	"context"
	"os"
	"path/filepath"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
)

// VectorStore keeps checkpoints with their full-text index and vectors:
// belay's store, e.g. store/sqlite's or store/postgres's.
type VectorStore = store.Store

// EmbeddingGenerator turns text into vectors, e.g. search.NewHash(0) (built
// in, offline, lexical) or search.NewOpenAI for an OpenAI-compatible
// endpoint.
type EmbeddingGenerator = search.Embedder

// Sort orders of List.
const (
	SortCreatedAt = "created_at"
	SortUpdatedAt = "updated_at"
)

// Service saves, finds and lists the checkpoints of one project. It acts as
// the database's owner: every checkpoint in the store is its to read.
type Service struct {
	core    *core.Service
	project string
	actor   belay.Actor
}

// NewService returns the service of the project at projectPath (absolute,
// existing) on vectorStore, embedding with embedder (the built-in one when
// nil). The caller keeps ownership of the store; Close the service before
// closing it.
func NewService(vectorStore VectorStore, embedder EmbeddingGenerator, projectPath string) (*Service, error) {
	if !filepath.IsAbs(projectPath) {
		return nil, belay.Invalid("projectPath", "projectPath must be an absolute path, got %q", belay.Clip(projectPath, 200))
	}
	if fi, err := os.Stat(projectPath); err != nil || !fi.IsDir() {
		return nil, belay.Invalid("projectPath", "projectPath %q is not a directory", belay.Clip(projectPath, 200))
	}
	if vectorStore == nil {
		return nil, belay.Invalid("vectorStore", "a store is required")
	}
	return &Service{
		core:    core.New(core.Options{Store: vectorStore, Embedder: embedder}),
		project: filepath.Clean(projectPath),
		actor:   belay.Actor{UserID: core.BootstrapUser, Admin: true},
	}, nil
}

// Close stops the service's background work.
func (s *Service) Close() { s.core.Close() }

func (s *Service) as(ctx context.Context) context.Context { return belay.WithActor(ctx, s.actor) }

// CreateCheckpointRequest is what Create saves. ProjectPath defaults to the
// service's project.
type CreateCheckpointRequest struct {
	Summary     string
	Description string
	ProjectPath string
	Context     map[string]string
	Tags        []string
}

// Create saves a checkpoint in the project's active session (started when
// there is none) and embeds it before returning, so Search finds it by
// meaning at once (by its words it always does).
func (s *Service) Create(ctx context.Context, req *CreateCheckpointRequest) (*belay.Checkpoint, error) {
	if req == nil {
		return nil, belay.Invalid("request", "a request is required")
	}
	project := req.ProjectPath
	if project == "" {
		project = s.project
	}
	ctx = s.as(ctx)
	cp, err := s.core.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: req.Summary,
		Description: req.Description, Context: req.Context, Tags: req.Tags, Type: belay.TypeAuto, Trigger: belay.TriggerSubtaskComplete})
	if err != nil {
		return nil, err
	}
	if err := s.core.IndexQueued(ctx, nil); err != nil {
		return nil, err
	}
	return s.core.GetCheckpoint(ctx, cp.ID)
}

// Search returns the topK (default 5, at most 100) checkpoints best matching
// query, best first, of projectPath when set, carrying every one of tags.
// There is no minimum score; nothing matching is an empty list.
func (s *Service) Search(ctx context.Context, query string, topK int, projectPath string, tags []string) (*belay.SearchResult, error) {
	return s.core.SearchCheckpoints(s.as(ctx), belay.SearchInput{Query: query, TopK: topK, ProjectPath: projectPath, Tags: tags})
}

// ListResult is a page of checkpoints with the accurate total.
type ListResult struct {
	Checkpoints []*belay.Checkpoint
	Total       int64
	Limit       int
	Offset      int
	// HasMore says more follow, from NextOffset: a page holds fewer than
	// Limit when the checkpoints' states are large (see store.PageBytes).
	HasMore    bool
	NextOffset int
}

// List pages through the checkpoints, newest first by sortBy (SortCreatedAt,
// the default, or SortUpdatedAt), of projectPath when set. limit defaults to
// 10 (at most 100).
func (s *Service) List(ctx context.Context, limit, offset int, projectPath string, sortBy string) (*ListResult, error) {
	order := belay.OrderCreatedAt
	switch sortBy {
	case "", SortCreatedAt:
	case SortUpdatedAt:
		order = belay.OrderUpdatedAt
	default:
		return nil, belay.Invalid("sortBy", "sortBy must be %s or %s, got %q", SortCreatedAt, SortUpdatedAt, belay.Clip(sortBy, 40))
	}
	if limit == 0 {
		limit = 10
	}
	list, err := s.core.ListCheckpoints(s.as(ctx), belay.ListCheckpointsInput{ProjectPath: projectPath, Limit: limit, Offset: offset,
		OrderBy: order, OrderDir: belay.OrderDesc})
	if err != nil {
		return nil, err
	}
	out := &ListResult{Checkpoints: list.Items, Total: list.TotalCount, Limit: limit, Offset: offset, HasMore: list.HasMore}
	if list.HasMore {
		out.NextOffset = list.NextOffset(offset)
	}
	return out, nil
}

// GetByID returns one checkpoint, or CHECKPOINT_NOT_FOUND.
func (s *Service) GetByID(ctx context.Context, id string) (*belay.Checkpoint, error) {
	return s.core.GetCheckpoint(s.as(ctx), id)
}

// Delete removes a checkpoint, from the search index too.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.core.DeleteCheckpoint(s.as(ctx), id)
}

// Health reports whether the store answers.
func (s *Service) Health(ctx context.Context) error { return s.core.Health(ctx) }
