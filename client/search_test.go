package client_test

import (
	"context"
	"testing"

	"github.com/belayhq/belay"
)

// TestSearchMatchesLocalService: the client finds what core finds, in the
// same order, and fails with the same codes and fields.
func TestSearchMatchesLocalService(t *testing.T) {
	ctx := anonCtx
	e := newEnv(t)
	for _, s := range []string{"Implemented JWT authentication", "JWT refresh tokens", "Migration of the users table"} {
		if _, err := e.local.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: e.project, Summary: s, Tags: []string{"x", "y"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range []belay.SearchInput{
		{Query: "jwt tokens", Explain: true},
		{Query: "migrations", TopK: 1, ProjectPath: e.project, Tags: []string{"x", "y"}},
		{Query: `OC-41252 "AND (`},
	} {
		local, err := e.local.SearchCheckpoints(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		remote, err := e.remote.SearchCheckpoints(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "search "+in.Query, remote, local)
	}
	for _, tc := range []struct {
		in    belay.SearchInput
		field string
	}{
		{belay.SearchInput{}, "query"},
		{belay.SearchInput{Query: "a", TopK: 101}, "topK"},
		{belay.SearchInput{Query: "a", ProjectPath: "rel"}, "projectPath"},
		{belay.SearchInput{Query: "a", Tags: []string{"a,b"}}, "tags[0]"},
	} {
		_, lerr := e.local.SearchCheckpoints(ctx, tc.in)
		_, rerr := e.remote.SearchCheckpoints(ctx, tc.in)
		for _, err := range []error{lerr, rerr} {
			be, ok := err.(*belay.Error)
			if !ok || be.Code != belay.CodeValidation || be.Details["field"] != tc.field {
				t.Errorf("%+v: %v, want VALIDATION_ERROR on %s locally and remotely", tc.in, err, tc.field)
			}
		}
	}
	for _, f := range []func(context.Context, belay.Service) error{
		func(ctx context.Context, s belay.Service) error {
			_, err := s.Reindex(ctx, belay.ReindexInput{})
			return err
		},
		func(ctx context.Context, s belay.Service) error { _, err := s.IndexStatus(ctx); return err },
	} {
		if lerr, rerr := f(ctx, e.local), f(ctx, e.remote); belay.ErrorCode(lerr) != belay.CodeUnauthorized || belay.ErrorCode(rerr) != belay.CodeUnauthorized {
			t.Errorf("admin calls by a user: %v locally, %v remotely; want UNAUTHORIZED", lerr, rerr)
		}
	}
}
