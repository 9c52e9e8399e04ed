package postgres

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Times are stored as Unix nanoseconds: exact, sortable and cheap to compare.
func ts(t time.Time) int64 { return t.UnixNano() }

func fromTS(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func fromNullTS(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromTS(n.Int64)
	return &t
}

// raw stores a JSON document as is; nil becomes NULL.
func raw(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

func fromRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// encode stores v as JSON; a nil pointer, slice or map becomes NULL.
func encode[T any](v T, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

func decode[T any](b []byte, dst *T) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("decode %T: %w", dst, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
