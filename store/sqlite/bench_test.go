package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// BenchmarkUpdate measures one write transaction appending one event: the
// fixed cost of Update (hand-offs to the writer, BEGIN, COMMIT) on top of a
// small write. With -cpu 1,8 the parallel runs show what group commit buys.
func BenchmarkUpdate(b *testing.B) {
	db, err := Open(context.Background(), filepath.Join(b.TempDir(), "belay.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			err := db.Update(ctx, func(tx store.Tx) error {
				return tx.AppendEvent(ctx, &belay.Event{Type: belay.EventCheckpointCreated, Data: []byte(`{"seq":1}`), CreatedAt: now})
			})
			if err != nil {
				panic(fmt.Sprint(err))
			}
		}
	})
}
