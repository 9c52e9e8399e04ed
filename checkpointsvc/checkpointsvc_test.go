package checkpointsvc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/checkpointsvc"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store/sqlite"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "belay-example")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc, err := checkpointsvc.NewService(db, search.NewHash(0), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()

	for _, s := range []string{"JWT authentication middleware", "landing page colours", "database migrations for users"} {
		if _, err := svc.Create(ctx, &checkpointsvc.CreateCheckpointRequest{Summary: s, Tags: []string{"backend"}}); err != nil {
			log.Fatal(err)
		}
	}
	found, err := svc.Search(ctx, "authentication", 1, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(found.Results[0].Checkpoint.Summary)
	page, err := svc.List(ctx, 2, 0, dir, checkpointsvc.SortCreatedAt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(page.Total, len(page.Checkpoints), page.Checkpoints[0].Summary, page.HasMore, page.NextOffset)
	last, err := svc.List(ctx, 2, page.NextOffset, dir, checkpointsvc.SortCreatedAt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(last.Checkpoints), last.HasMore)
	// Output:
	// JWT authentication middleware
	// 3 2 database migrations for users true 2
	// 1 false
}

func newService(t *testing.T) (*checkpointsvc.Service, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := checkpointsvc.NewService(db, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc, dir
}

func TestCreateEmbedsAndDeleteForgets(t *testing.T) {
	ctx := context.Background()
	svc, dir := newService(t)
	cp, err := svc.Create(ctx, &checkpointsvc.CreateCheckpointRequest{Summary: "retry queue for webhooks",
		Description: "exponential backoff", Context: map[string]string{"branch": "main"}, Tags: []string{"infra"}})
	if err != nil {
		t.Fatal(err)
	}
	if cp.ProjectPath != dir || cp.TokenCount == 0 || cp.UpdatedAt.IsZero() {
		t.Errorf("created = %+v", cp)
	}
	res, err := svc.Search(ctx, "webhook retries", 5, dir, []string{"infra"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Checkpoint.ID != cp.ID || res.Results[0].Distance >= 1 {
		t.Fatalf("search = %+v: the checkpoint must be found with its vector (distance < 1)", res.Results)
	}
	if got, err := svc.GetByID(ctx, cp.ID); err != nil || got.Summary != cp.Summary {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if err := svc.Delete(ctx, cp.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Search(ctx, "webhook retries", 5, "", nil); err != nil || len(res.Results) != 0 {
		t.Errorf("after delete: %+v, %v", res, err)
	}
	var be *belay.Error
	if _, err := svc.GetByID(ctx, cp.ID); !errors.As(err, &be) || be.Code != belay.CodeCheckpointNotFound {
		t.Errorf("get deleted = %v", err)
	}
	if err := svc.Health(ctx); err != nil {
		t.Error(err)
	}
}

func TestErrorsAreCoded(t *testing.T) {
	ctx := context.Background()
	svc, dir := newService(t)
	for name, call := range map[string]func() error{
		"empty summary": func() error {
			_, err := svc.Create(ctx, &checkpointsvc.CreateCheckpointRequest{Summary: ""})
			return err
		},
		"relative project": func() error {
			_, err := svc.Create(ctx, &checkpointsvc.CreateCheckpointRequest{Summary: "s", ProjectPath: "rel"})
			return err
		},
		"empty query": func() error { _, err := svc.Search(ctx, " ", 5, "", nil); return err },
		"top_k":       func() error { _, err := svc.Search(ctx, "q", 101, "", nil); return err },
		"sort":        func() error { _, err := svc.List(ctx, 10, 0, dir, "size"); return err },
		"limit":       func() error { _, err := svc.List(ctx, 101, 0, dir, ""); return err },
		"no store": func() error {
			_, err := checkpointsvc.NewService(nil, nil, dir)
			return err
		},
		"missing directory": func() error {
			_, err := checkpointsvc.NewService(nil, nil, filepath.Join(dir, "nope"))
			return err
		},
	} {
		var be *belay.Error
		if err := call(); !errors.As(err, &be) || be.Code != belay.CodeValidation {
			t.Errorf("%s: %v, want VALIDATION_ERROR", name, err)
		}
	}
	if page, err := svc.List(ctx, 0, 0, "", ""); err != nil || page.Total != 0 || page.Limit != 10 {
		t.Errorf("nothing saved: %+v, %v", page, err)
	}
}
