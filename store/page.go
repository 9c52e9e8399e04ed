package store

import (
	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store/chunkstore"
)

// PageBytes is what a list page of checkpoints or sessions carries at most,
// give or take its last item: the page ends after the item whose agent
// state, outputs and metadata bring it to PageBytes or more, however many
// more its limit allows. Each of those documents may be belay.MaxStateBytes,
// so a page of 100 could otherwise hold gigabytes, read into memory whole.
const PageBytes = belay.MaxPageBytes

// CheckpointBytes is what a checkpoint weighs in a page (see PageBytes):
// its agent state, stored or loaded, outputs and metadata.
func CheckpointBytes(c *belay.Checkpoint) int64 {
	return int64(chunkstore.Length(c.AgentState) + len(c.Outputs) + len(c.Metadata))
}

// SessionBytes is what a session weighs in a page (see PageBytes): its
// state, stored or loaded, and metadata.
func SessionBytes(s *belay.Session) int64 {
	return int64(chunkstore.Length(s.State) + len(s.Metadata))
}

// Rows is what ReadPage reads: a driver's result set.
type Rows interface{ Next() bool }

// ReadPage reads a page of a list from rows, which the query selects one
// more than limit of (limit < 0: no limit): up to limit items, ending
// after the item whose weight brings the page to maxBytes or more (0: no
// bound). more reports whether a row follows the page; that row is never
// scanned.
func ReadPage[T any](rows Rows, scan func() (T, error), limit int, maxBytes int64, weight func(T) int64) (page []T, more bool, err error) {
	var used int64
	for rows.Next() {
		if len(page) == limit || maxBytes > 0 && used >= maxBytes {
			return page, true, nil
		}
		it, err := scan()
		if err != nil {
			return nil, false, err
		}
		page = append(page, it)
		used += weight(it)
	}
	return page, false, nil
}
