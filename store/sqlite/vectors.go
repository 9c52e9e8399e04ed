package sqlite

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// vectorIndex is an in-memory copy of the checkpoints' vectors of one model,
// so that a search compares its query with every vector in scope without
// reading them from disk each time. Before every search it catches up with
// the database (search_state's counters): vectors written since it last
// looked are loaded by their vector_version, and after deletions the
// vectors gone are dropped. So it also sees what other processes wrote.
//
// The vectors are held column by column (cols[d][i] is dimension d of the
// i-th vector): a query multiplies each of its non-zero dimensions with one
// contiguous column, which reads memory in order and skips the dimensions a
// short query leaves at zero.
type vectorIndex struct {
	mu sync.RWMutex
	// model and dims are the vector space held; vectors of others are not.
	model string
	dims  int
	// version is the vector_version loaded up to; removed the deletion
	// counter when the index last dropped deleted vectors.
	version, removed int64
	slot             map[int64]int // doc_id → position
	docs             []int64
	ids              []string
	groups           []int32
	cols             [][]float32
	// groupList holds the (session, project) pairs of the vectors: a scope
	// is decided per group, by SQL, not per vector.
	groupList []vectorGroup
	groupOf   map[vectorGroup]int32
}

type vectorGroup struct{ session, project string }

func newVectorIndex() *vectorIndex {
	return &vectorIndex{slot: map[int64]int{}, groupOf: map[vectorGroup]int32{}}
}

// refresh catches up with the database, for vectors of model and dims.
func (ix *vectorIndex) refresh(ctx context.Context, q querier, model string, dims int) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if model != ix.model || dims != ix.dims {
		ix.model, ix.dims, ix.version, ix.removed = model, dims, 0, 0
		ix.slot, ix.docs, ix.ids, ix.groups, ix.cols = map[int64]int{}, nil, nil, nil, make([][]float32, dims)
		ix.groupList, ix.groupOf = nil, map[vectorGroup]int32{}
	}
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
	rows, err := q.QueryContext(ctx, `SELECT doc_id, checkpoint_id, session_id, project_path, model, vector
		FROM checkpoint_search WHERE vector_version > ?`, ix.version)
	if err != nil {
		return fmt.Errorf("sqlite: load vectors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var doc int64
		var id, rowModel string
		var g vectorGroup
		var blob []byte
		if err := rows.Scan(&doc, &id, &g.session, &g.project, &rowModel, &blob); err != nil {
			return fmt.Errorf("sqlite: scan vector: %w", err)
		}
		vec, err := decodeVector(blob)
		if err != nil {
			return err
		}
		pos, held := ix.slot[doc]
		if rowModel != ix.model || len(vec) != ix.dims {
			if held { // replaced by a vector of another model
				ix.remove(pos)
			}
			continue
		}
		if !held {
			gi, ok := ix.groupOf[g]
			if !ok {
				gi = int32(len(ix.groupList))
				ix.groupList = append(ix.groupList, g)
				ix.groupOf[g] = gi
			}
			pos = len(ix.docs)
			ix.slot[doc] = pos
			ix.docs, ix.ids, ix.groups = append(ix.docs, doc), append(ix.ids, id), append(ix.groups, gi)
			for d := range ix.cols {
				ix.cols[d] = append(ix.cols[d], 0)
			}
		}
		for d, x := range vec {
			ix.cols[d][pos] = x
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
	live := make(map[int64]bool, len(ix.docs))
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
	for pos := len(ix.docs) - 1; pos >= 0; pos-- {
		if !live[ix.docs[pos]] {
			ix.remove(pos)
		}
	}
	return nil
}

// remove drops the vector at pos, moving the last one into its place.
func (ix *vectorIndex) remove(pos int) {
	last := len(ix.docs) - 1
	delete(ix.slot, ix.docs[pos])
	if pos != last {
		ix.slot[ix.docs[last]] = pos
		ix.docs[pos], ix.ids[pos], ix.groups[pos] = ix.docs[last], ix.ids[last], ix.groups[last]
		for d := range ix.cols {
			ix.cols[d][pos] = ix.cols[d][last]
		}
	}
	ix.docs, ix.ids, ix.groups = ix.docs[:last], ix.ids[:last], ix.groups[:last]
	for d := range ix.cols {
		ix.cols[d] = ix.cols[d][:last]
	}
}

// scored is a held vector's similarity to a query.
type scored struct {
	pos        int
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

// rank returns up to limit held vectors more similar to query than 0, most
// similar first, among those keep accepts. Callers hold ix.mu for reading
// and pass a query of the index's length.
func (ix *vectorIndex) rank(query []float32, keep func(pos int) bool, limit int) []scored {
	sims := make([]float32, len(ix.docs))
	for d, x := range query {
		if x == 0 {
			continue
		}
		for i, v := range ix.cols[d] {
			sims[i] += x * v
		}
	}
	h := make(topHeap, 0, limit+1)
	for i, sim := range sims {
		s := float64(sim)
		if s <= 0 || (len(h) == limit && s <= h[0].similarity) || !keep(i) {
			continue
		}
		heap.Push(&h, scored{pos: i, similarity: s})
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
// when one is held. Callers hold ix.mu for reading.
func (ix *vectorIndex) similarity(doc int64, query []float32) (float64, bool) {
	pos, ok := ix.slot[doc]
	if !ok {
		return 0, false
	}
	var dot float32
	for d, x := range query {
		dot += x * ix.cols[d][pos]
	}
	return float64(dot), true
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
