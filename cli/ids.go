package cli

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/belayhq/belay"
)

// abbrev shortens ids as git does: each to its shortest prefix of at least
// shownPrefix characters that no other id it knows begins with. Every
// command that takes an id takes such a prefix. Ids are time-ordered (UUID
// v7), so a fixed width would show the same characters for everything made
// in the same millisecond.
type abbrev struct {
	sorted []string
}

// shownPrefix is the shortest id prefix a list shows: a UUID v7's
// millisecond (12 hex digits and a dash). A shorter prefix unique among the
// ids listed would match ids not listed, made in the same minute or hour,
// and fail as ambiguous when typed; ids of different milliseconds differ
// within it.
const shownPrefix = 13

// newAbbrev knows ids; empty ones are skipped.
func newAbbrev(ids ...string) *abbrev {
	a := &abbrev{}
	for _, id := range ids {
		a.add(id)
	}
	return a
}

// add makes id known, for output that grows (a live stream): prefixes shown
// before it stay as they were.
func (a *abbrev) add(id string) {
	if id == "" {
		return
	}
	if i, found := slices.BinarySearch(a.sorted, id); !found {
		a.sorted = slices.Insert(a.sorted, i, id)
	}
}

// of returns id's shortest unique prefix among the known ids, "-" for no id.
func (a *abbrev) of(id string) string {
	if id == "" {
		return "-"
	}
	n := shownPrefix
	i, _ := slices.BinarySearch(a.sorted, id)
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(a.sorted) && a.sorted[j] != id {
			n = max(n, commonPrefix(id, a.sorted[j])+1)
		}
	}
	return id[:min(n, len(id))]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// sessionHint is how a command that takes --session names another session
// when the working directory has none.
const sessionHint = "pass --session ID (see `belay sessions`) or save a checkpoint here first"

// sessionFlag turns --session (an id or a unique prefix) into the session's
// id; "" stays "".
func (a *app) sessionFlag(ctx context.Context, svc belay.Service, ref string) (string, error) {
	if ref == "" || belay.IsUUID(ref) {
		return strings.ToLower(ref), nil
	}
	sess, err := svc.ResolveSession(ctx, ref)
	if err != nil {
		return "", err
	}
	return sess.ID, nil
}

// namedSession returns the session ref names (an id or a unique prefix), or
// without ref the project's current session; hint says how to
// name one when the working directory has none.
func (a *app) namedSession(ctx context.Context, svc belay.Service, ref, hint string) (*belay.Session, error) {
	if ref != "" {
		return svc.ResolveSession(ctx, ref)
	}
	root, err := a.project(ctx, svc)
	if err != nil {
		return nil, err
	}
	sess, err := svc.CurrentSession(ctx, root)
	return sess, withHint(err, hint)
}

// withHint adds to "this project has no session" how the command names one.
func withHint(err error, hint string) error {
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeSessionNotFound || be.Details["projectPath"] == nil {
		return err
	}
	out := *be
	out.Message += "; " + hint
	return &out
}
