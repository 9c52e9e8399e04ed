package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/internal/testutil"
)

func TestRetentionKeepsWhatMattersAndDeletesTheRest(t *testing.T) {
	clock := testclock.New(start, 0)
	svc := newService(t, clock)
	project := t.TempDir()
	var cps []*belay.Checkpoint
	for i := range 8 {
		in := belay.CreateCheckpointInput{ProjectPath: project, Summary: "step", AgentState: []byte(fmt.Sprintf(`{"step":%d}`, i))}
		switch i {
		case 1:
			in.Type = belay.TypePhase
		case 2:
			in.HITL = &belay.HITLInput{Required: true}
		}
		cps = append(cps, mustCreate(t, svc, in))
		clock.Advance(24 * time.Hour)
	}
	if _, err := svc.Decide(localCtx, belay.DecideInput{CheckpointID: cps[2].ID, SelectedOption: "approve"}); err != nil {
		t.Fatal(err)
	}
	// A rollback to #4 makes #4 and the state it left (#8, the head: nothing
	// changed since, so no pre-rollback snapshot is needed) branch points.
	if _, err := svc.RestoreCheckpoint(localCtx, belay.RestoreInput{CheckpointID: cps[3].ID}); err != nil {
		t.Fatal(err)
	}
	other := mustCreate(t, svc, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "another project"})

	_, err := svc.ApplyRetention(localCtx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetRetention(localCtx, belay.RetentionPolicy{ProjectPath: project, KeepLast: 2, MaxAge: 72 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	n, err := svc.ApplyRetention(localCtx)
	if err != nil {
		t.Fatal(err)
	}
	left, err := svc.ListCheckpoints(localCtx, belay.ListCheckpointsInput{SessionID: cps[0].SessionID, OrderDir: belay.OrderAsc, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, cp := range left.Items {
		seqs = append(seqs, cp.Seq)
	}
	// Gone: #1 (plain, old). Kept: #2 phase, #3 HITL, #4 rollback target,
	// #8 the rollback's undo point, and the last two, under 72 h old.
	// #5 and #6 are old and beyond the last two: gone too.
	want := []int64{2, 3, 4, 7, 8}
	if len(seqs) != len(want) || n != 3 {
		t.Fatalf("left %v (deleted %d), want %v", seqs, n, want)
	}
	for i := range want {
		if seqs[i] != want[i] {
			t.Fatalf("left %v, want %v", seqs, want)
		}
	}
	if _, err := svc.GetCheckpoint(localCtx, other.ID); err != nil {
		t.Errorf("another project's checkpoint went: %v", err)
	}
	list, err := svc.ListRetention(localCtx)
	if err != nil || len(list) != 1 || list[0].KeepLast != 2 {
		t.Fatalf("policies = %+v, %v", list, err)
	}
	if _, err := svc.SetRetention(localCtx, belay.RetentionPolicy{ProjectPath: project}); err != nil {
		t.Fatal(err)
	}
	if list, _ := svc.ListRetention(localCtx); len(list) != 0 {
		t.Errorf("a zero policy was kept: %+v", list)
	}
	_, err = svc.SetRetention(localCtx, belay.RetentionPolicy{ProjectPath: "rel"})
	testutil.WantCode(t, err, belay.CodeValidation, "projectPath")
	_, err = svc.SetRetention(localCtx, belay.RetentionPolicy{ProjectPath: project, KeepLast: -1})
	testutil.WantCode(t, err, belay.CodeValidation)
	_, err = svc.SetRetention(hitlAs("alice"), belay.RetentionPolicy{ProjectPath: project, KeepLast: 1})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
}
