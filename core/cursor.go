package core

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// cursor is the position after the last item of a page. It is opaque to
// callers: base64url of a small JSON document bound to the list's order, so
// a cursor from one order cannot be replayed against another.
type cursor struct {
	Order string `json:"o"`
	Type  string `json:"t,omitempty"`
	At    int64  `json:"c"` // the time in nanoseconds, or the seq in a session's order
	ID    string `json:"i"`
}

const maxCursorLen = 512

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses a cursor made for the given order.
func decodeCursor(s, order string) (cursor, error) {
	bad := func(why string) (cursor, error) {
		return cursor{}, belay.Invalid("cursor", "cursor is not valid: %s; pass the nextCursor of a previous page unchanged", why)
	}
	if len(s) > maxCursorLen {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return bad("malformed")
	}
	if c.Order != order {
		return bad("it belongs to a list with another order")
	}
	if !belay.IsUUID(c.ID) || c.At <= 0 {
		return bad("malformed position")
	}
	if order != "s" && order[0] == 't' && !belay.CheckpointType(c.Type).Valid() {
		return bad("malformed position")
	}
	return c, nil
}

// checkpointOrder names the order of a checkpoint list: by creation ("c"),
// type ("t"), update ("u"), or, for one session's checkpoints in the default
// order, the session's own ("q": by seq, see store.CheckpointQuery), and the
// direction.
func checkpointOrder(in *belay.ListCheckpointsInput) string {
	o := "c"
	switch {
	case in.OrderBy == belay.OrderType:
		o = "t"
	case in.OrderBy == belay.OrderUpdatedAt:
		o = "u"
	case in.SessionID != "":
		o = "q"
	}
	if in.OrderDir == belay.OrderAsc {
		return o + "a"
	}
	return o + "d"
}

// DecodeCheckpointCursor parses a checkpoint list cursor for the order of in.
// It is exported for fuzzing and for transports that validate early.
func DecodeCheckpointCursor(in *belay.ListCheckpointsInput) (*store.CheckpointKey, error) {
	if in.Cursor == "" {
		return nil, nil
	}
	c, err := decodeCursor(in.Cursor, checkpointOrder(in))
	if err != nil {
		return nil, err
	}
	at := time.Unix(0, c.At).UTC()
	return &store.CheckpointKey{Type: belay.CheckpointType(c.Type), CreatedAt: at, UpdatedAt: at, Seq: c.At, ID: c.ID}, nil
}
