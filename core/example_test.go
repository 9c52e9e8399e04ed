package core_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store/sqlite"
)

// An agent asks a human before going on; the human decides; the agent,
// waiting, gets the decision at once.
func Example() {
	dir, err := os.MkdirTemp("", "belay-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := localCtx
	db, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})

	agent := belay.WithActor(ctx, belay.Actor{UserID: "agent"})
	cp, err := svc.CreateCheckpoint(agent, belay.CreateCheckpointInput{
		ProjectPath: dir, Summary: "architecture drafted", AgentState: []byte(`{"step":3}`),
		HITL: &belay.HITLInput{Required: true, Title: "Which database?", Options: []belay.HITLOption{
			{ID: "pg", Label: "PostgreSQL", Action: belay.ActionApprove, IsDefault: true},
			{ID: "stop", Label: "Stop here", Action: belay.ActionReject},
		}, Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionApprove}},
	})
	if err != nil {
		log.Fatal(err)
	}
	sess, _ := svc.GetSession(agent, cp.SessionID)
	fmt.Printf("checkpoint #%d, session %s\n", cp.Seq, sess.Status)

	go func() {
		human := belay.WithActor(ctx, belay.Actor{UserID: "alice", Admin: true})
		if _, err := svc.Decide(human, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove,
			SelectedOption: "pg", Feedback: "reporting needs SQL"}); err != nil {
			log.Fatal(err)
		}
	}()
	res, err := svc.WaitDecision(agent, cp.ID, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s by %s: %s; session %s\n", res.Decision.SelectedOption, res.Decision.UserID, res.Decision.Feedback, res.Session.Status)
	// Output:
	// checkpoint #1, session awaiting_input
	// pg by alice: reporting needs SQL; session running
}
