package core_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
)

func TestSaveRateLimitPerProject(t *testing.T) {
	clock := testclock.New(start, 0)
	db, err := sqlite.Open(localCtx, filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := core.New(core.Options{Store: db, Clock: clock, SavesPerMinute: 10})
	a, b := t.TempDir(), t.TempDir()
	save := func(project string) error {
		_, err := svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "s"})
		return err
	}
	// A burst of twice the rate, then refused with the wait.
	for i := range 20 {
		if err := save(a); err != nil {
			t.Fatalf("save %d of the burst: %v", i+1, err)
		}
	}
	be := testutil.WantCode(t, save(a), belay.CodeRateLimited)
	if be.Details["retryAfter"] != 6 {
		t.Errorf("retryAfter = %v, want 6 (one save every 6 s)", be.Details["retryAfter"])
	}
	// Another project has its own bucket; refused saves wrote nothing.
	if err := save(b); err != nil {
		t.Fatalf("another project: %v", err)
	}
	list, _ := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{ProjectPath: a, Limit: 100})
	if list.TotalCount != 20 {
		t.Errorf("%d checkpoints in the limited project, want 20", list.TotalCount)
	}
	clock.Advance(6 * time.Second)
	if err := save(a); err != nil {
		t.Errorf("after the wait: %v", err)
	}
	testutil.WantCode(t, save(a), belay.CodeRateLimited)

	// Each user has buckets of their own: another's saves, even refused
	// ones to a session it may not write to, cost this one nothing.
	bob := belay.WithActor(context.Background(), belay.Actor{UserID: "bob"})
	if _, err := svc.CreateCheckpoint(bob, belay.CreateCheckpointInput{ProjectPath: a, Summary: "bob's"}); err != nil {
		t.Errorf("another user's save to the project: %v", err)
	}
	sess := list.Items[0].SessionID
	for range 25 {
		_, err := svc.CreateCheckpoint(bob, belay.CreateCheckpointInput{SessionID: sess, Summary: "spam"})
		if err == nil {
			t.Fatal("bob saved into a session of another user")
		}
	}
	clock.Advance(6 * time.Second)
	if _, err := svc.CreateCheckpoint(localCtx, belay.CreateCheckpointInput{SessionID: sess, Summary: "legit"}); err != nil {
		t.Errorf("the owner's save after another user's refused ones: %v", err)
	}
}
