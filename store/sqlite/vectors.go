package sqlite

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// vectorIndex is an in-memory copy of the checkpoints' vectors, so that a
// search compares its query with every vector in scope without reading them
// from disk each time. Before every search it catches up with the database
// (search_state's counters): vectors written since it last looked are loaded
// by their vector_version, and after deletions the vectors gone are dropped.
// So it also sees what other processes wrote.
type vectorIndex struct {
	mu sync.RWMutex
	// version is the vector_version loaded up to; removed the deletion
	// counter when the index last dropped deleted vectors.
	version, removed int64
	slot             map[int64]int // doc_id → entries index
	entries          []vectorEntry
	// groups are the (session, project) pairs of the entries: a scope is
	// decided per group, by SQL, not per vector.
	groups  []vectorGroup
	groupOf map[vectorGroup]int32
}

type vectorEntry struct {
	doc   int64
	id    string
	group int32
	model string
	vec   []float32
}

type vectorGroup struct{ session, project string }

func newVectorIndex() *vectorIndex {
	return &vectorIndex{slot: map[int64]int{}, groupOf: map[vectorGroup]int32{}}
}

// refresh catches up with the database.
func (ix *vectorIndex) refresh(ctx context.Context, q querier) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var version, removed int64
	if err := q.QueryRowContext(ctx, `SELECT vector_version, removed FROM search_state WHERE id = 1`).Scan(&version, &removed); err != nil {
		return fmt.Errorf("sqlite: read search state: %w", err)
	}
	if removed != ix.removed {
		if err := ix.prune(ctx, q); err != nil {
			return err
		}
		ix.removed = removed
	}
	if version == ix.version {
		return nil
	}
	rows, err := q.QueryContext(ctx, `SELECT s.doc_id, s.checkpoint_id, c.session_id, c.project_path, s.model, s.vector
		FROM checkpoint_search s JOIN checkpoints c ON c.id = s.checkpoint_id WHERE s.vector_version > ?`, ix.version)
	if err != nil {
		return fmt.Errorf("sqlite: load vectors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e vectorEntry
		var g vectorGroup
		var blob []byte
		if err := rows.Scan(&e.doc, &e.id, &g.session, &g.project, &e.model, &blob); err != nil {
			return fmt.Errorf("sqlite: scan vector: %w", err)
		}
		if e.vec, err = decodeVector(blob); err != nil {
			return err
		}
		gi, ok := ix.groupOf[g]
		if !ok {
			gi = int32(len(ix.groups))
			ix.groups = append(ix.groups, g)
			ix.groupOf[g] = gi
		}
		e.group = gi
		if i, ok := ix.slot[e.doc]; ok {
			ix.entries[i] = e
		} else {
			ix.slot[e.doc] = len(ix.entries)
			ix.entries = append(ix.entries, e)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: load vectors: %w", err)
	}
	ix.version = version
	return nil
}

// prune drops the vectors whose rows are gone.
func (ix *vectorIndex) prune(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SELECT doc_id FROM checkpoint_search WHERE vector_version > 0`)
	if err != nil {
		return fmt.Errorf("sqlite: list vectors: %w", err)
	}
	defer rows.Close()
	live := make(map[int64]bool, len(ix.entries))
	for rows.Next() {
		var doc int64
		if err := rows.Scan(&doc); err != nil {
			return fmt.Errorf("sqlite: scan vector id: %w", err)
		}
		live[doc] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: list vectors: %w", err)
	}
	kept := ix.entries[:0]
	clear(ix.slot)
	for _, e := range ix.entries {
		if live[e.doc] {
			ix.slot[e.doc] = len(kept)
			kept = append(kept, e)
		}
	}
	clear(ix.entries[len(kept):])
	ix.entries = kept
	return nil
}

// scored is a vector entry's similarity to a query.
type scored struct {
	entry      int
	similarity float64
}

// topHeap keeps the best candidates with the worst on top.
type topHeap []scored

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[i].similarity < h[j].similarity }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *topHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// rank returns up to limit entries of model more similar to query than 0,
// most similar first, among those keep accepts. Callers hold ix.mu for reading.
func (ix *vectorIndex) rank(query []float32, model string, keep func(*vectorEntry) bool, limit int) []scored {
	// Queries are short: when few of the query's dimensions are set (the
	// built-in embedder's), only those are multiplied.
	var nonzero []int
	for i, x := range query {
		if x != 0 {
			nonzero = append(nonzero, i)
		}
	}
	sparse := len(nonzero) < len(query)/2
	h := make(topHeap, 0, limit+1)
	for i := range ix.entries {
		e := &ix.entries[i]
		if e.model != model || len(e.vec) != len(query) || !keep(e) {
			continue
		}
		var dot float32
		if sparse {
			for _, d := range nonzero {
				dot += query[d] * e.vec[d]
			}
		} else {
			dot = dotProduct(query, e.vec)
		}
		sim := float64(dot)
		if sim <= 0 || (len(h) == limit && sim <= h[0].similarity) {
			continue
		}
		heap.Push(&h, scored{entry: i, similarity: sim})
		if len(h) > limit {
			heap.Pop(&h)
		}
	}
	out := make([]scored, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(scored)
	}
	return out
}

// similarity returns the cosine similarity of query with the vector of doc,
// when it has one of model and the query's length. Callers hold ix.mu for reading.
func (ix *vectorIndex) similarity(doc int64, query []float32, model string) (float64, bool) {
	i, ok := ix.slot[doc]
	if !ok {
		return 0, false
	}
	e := &ix.entries[i]
	if e.model != model || len(e.vec) != len(query) {
		return 0, false
	}
	return float64(dotProduct(query, e.vec)), true
}

func dotProduct(a, b []float32) float32 {
	var dot float32
	for i := range a {
		dot += a[i] * b[i]
	}
	return dot
}

// encodeVector stores a vector compactly: little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("sqlite: a stored vector of %d bytes is not float32s", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
