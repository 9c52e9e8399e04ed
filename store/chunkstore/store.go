package chunkstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/belayhq/belay"
)

// Store is the table of chunks a driver keeps, inside one transaction or
// on its read pool.
type Store interface {
	// Get returns what Put stored under those of ids that are stored.
	Get(ctx context.Context, ids []ID) (map[ID][]byte, error)
	// Missing returns those of ids that are not stored.
	Missing(ctx context.Context, ids []ID) ([]ID, error)
	// Put stores each chunk's Data under its ID (Data is the chunk's stored
	// form, which may be compressed); one stored already is left as it is.
	Put(ctx context.Context, chunks []Chunk) error
}

// Save returns what a driver stores in place of state. A state of at most
// InlineMax bytes (or nil) that is Plain (JSON always is) is kept in its row:
// as it is, or compressed (see CompressMin). A larger one is replaced by its
// root, after the chunks of it s lacks are stored. A driver that lets Sweep run concurrently must keep
// it from deleting a chunk between Missing and the commit (see Sweeper).
func Save(ctx context.Context, s Store, state []byte) ([]byte, error) {
	if inline(state) {
		return inlineForm(state), nil
	}
	return cutUp(state).save(ctx, s, nil)
}

// inline reports whether state is kept in its row rather than in chunks.
func inline(state []byte) bool { return len(state) <= InlineMax && Plain(state) }

// cutState is a state cut into chunks: its root, and the distinct chunks it
// refers to with their ids.
type cutState struct {
	root   []byte
	chunks []Chunk
	ids    []ID
}

func cutUp(state []byte) cutState {
	root, chunks := Split(state)
	ids := make([]ID, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	return cutState{root: root, chunks: chunks, ids: ids}
}

// lacking returns the chunks s does not store.
func (c cutState) lacking(ctx context.Context, s Store) ([]Chunk, error) {
	missing, err := s.Missing(ctx, c.ids)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	want := make(map[ID]bool, len(missing))
	for _, id := range missing {
		want[id] = true
	}
	var out []Chunk
	for _, ch := range c.chunks {
		if want[ch.ID] {
			out = append(out, ch)
		}
	}
	return out, nil
}

// save stores the chunks s lacks, in their stored form from stored or
// compressed now, and returns the root.
func (c cutState) save(ctx context.Context, s Store, stored map[ID][]byte) ([]byte, error) {
	lack, err := c.lacking(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(lack) == 0 {
		return c.root, nil
	}
	put := make([]Chunk, len(lack))
	for i, ch := range lack {
		data, ok := stored[ch.ID]
		if !ok {
			data = encode(ch.Data)
		}
		put[i] = Chunk{ID: ch.ID, Data: data}
	}
	if err := s.Put(ctx, put); err != nil {
		return nil, err
	}
	return c.root, nil
}

// Prepared is what Save stores for a state, worked out before the write
// transaction that stores it: the state compressed, or cut into chunks with
// those the store lacked then in their stored form already. The costly part
// of Save (hashing and compressing, most of a large state's save) is done
// beside other writers instead of inside the transaction, which only stores
// what it is given.
type Prepared struct {
	cutState
	state []byte
	// stored holds the stored form of each chunk missing when prepared.
	stored map[ID][]byte
	// inline is what the row keeps of a state kept in its row: the state
	// compressed, or the state itself when compressing it saved too little.
	inline []byte
}

// Prepare does the work of Save that can be done outside the transaction:
// it tries to compress a state kept in its row, or cuts a larger one as Save
// would and compresses the chunks s lacks now. It returns nil when Save has
// nothing to do: a state shorter than CompressMin is kept as it is.
func Prepare(ctx context.Context, s Store, state []byte) (*Prepared, error) {
	if inline(state) {
		if len(state) < CompressMin {
			return nil, nil
		}
		return &Prepared{state: state, inline: inlineForm(state)}, nil
	}
	c := cutUp(state)
	lack, err := c.lacking(ctx, s)
	if err != nil {
		return nil, err
	}
	p := &Prepared{cutState: c, state: state, stored: make(map[ID][]byte, len(lack))}
	for _, ch := range lack {
		// Kept until the transaction, maybe a while: in no more memory than
		// the stored form (encode's buffer has the chunk's size).
		b := encode(ch.Data)
		p.stored[ch.ID] = append(make([]byte, 0, len(b)), b...)
	}
	return p, nil
}

// For reports whether p was prepared from state: the same bytes in memory,
// not a copy.
func (p *Prepared) For(state []byte) bool {
	return p != nil && len(state) == len(p.state) && &state[0] == &p.state[0]
}

// Save stores the chunks of p's state that s lacks, as Save does, and
// returns its root. A chunk s lacks that was stored when p was prepared (a
// sweep deleted it since) is compressed now.
func (p *Prepared) Save(ctx context.Context, s Store) ([]byte, error) {
	if p.inline != nil {
		return p.inline, nil
	}
	return p.cutState.save(ctx, s, p.stored)
}

// maxStateLen bounds the length a root may declare, so a damaged root
// cannot make Load allocate without limit.
const maxStateLen = 1 << 30

// root is a parsed root.
type root struct {
	depth  int
	length int
	ids    []ID
}

func parseRoot(b []byte) (root, error) {
	if !IsRoot(b) || len(b) < 3 {
		return root{}, corrupt("the state's root is truncated")
	}
	depth := int(b[1])
	length, n := binary.Uvarint(b[2:])
	if n <= 0 || length == 0 || length > maxStateLen {
		return root{}, corrupt("the state's root declares an impossible length")
	}
	ids, ok := splitIDs(b[2+n:])
	if !ok || len(ids) == 0 || len(ids) > maxRootIDs {
		return root{}, corrupt("the state's root lists a broken set of chunk ids")
	}
	// Each level lists at least minSize bytes per id but the last, so no
	// level has more ids than the leaves, and no more than that allows.
	if depth > 8 || len(ids) > maxIDs(int(length)) {
		return root{}, corrupt("the state's root is deeper than its length allows")
	}
	return root{depth: depth, length: int(length), ids: ids}, nil
}

// maxIDs is how many chunks a level of a state of length bytes has at most.
func maxIDs(length int) int { return length/minSize + 1 }

func splitIDs(b []byte) ([]ID, bool) {
	if len(b)%len(ID{}) != 0 {
		return nil, false
	}
	ids := make([]ID, len(b)/len(ID{}))
	for i := range ids {
		copy(ids[i][:], b[i*len(ID{}):])
	}
	return ids, true
}

// Load returns the state stored as stored: stored itself when it is Plain,
// the state decompressed, or the state reassembled from s. Every chunk is
// checked against its id and the state against the length its root or
// compressed form declares; a missing or damaged chunk or compressed form is
// CHECKPOINT_CORRUPTED, never a wrong state.
func Load(ctx context.Context, s Store, stored []byte) ([]byte, error) {
	if Plain(stored) {
		return stored, nil
	}
	if !IsRoot(stored) {
		return inflate(stored)
	}
	r, err := parseRoot(stored)
	if err != nil {
		return nil, err
	}
	ids := r.ids
	for level := r.depth; ; level-- {
		data, err := fetch(ctx, s, ids, r.length)
		if err != nil {
			return nil, err
		}
		if level == 0 {
			if len(data) != r.length {
				return nil, corrupt(fmt.Sprintf("the state's chunks add up to %d bytes, not %d", len(data), r.length))
			}
			return data, nil
		}
		next, ok := splitIDs(data)
		if !ok || len(next) > maxIDs(r.length) {
			return nil, corrupt("an index chunk of the state is malformed")
		}
		ids = next
	}
}

// fetch returns the concatenation of the chunks ids, each checked against
// its id, and fails once it would pass limit bytes.
func fetch(ctx context.Context, s Store, ids []ID, limit int) ([]byte, error) {
	got, err := s.Get(ctx, uniq(ids))
	if err != nil {
		return nil, err
	}
	chunks := make(map[ID][]byte, len(got))
	for id, stored := range got {
		data, ok := decode(stored)
		if !ok || sha256.Sum256(data) != id {
			return nil, corrupt("a chunk of the state does not match its hash").With("chunk", hex.EncodeToString(id[:]))
		}
		chunks[id] = data
	}
	total := 0
	for _, id := range ids {
		data, ok := chunks[id]
		if !ok {
			return nil, corrupt("a chunk of the state is missing").With("chunk", hex.EncodeToString(id[:]))
		}
		if total += len(data); total > limit {
			return nil, corrupt("the state's chunks add up to more than its length")
		}
	}
	out := make([]byte, 0, total)
	for _, id := range ids {
		out = append(out, chunks[id]...)
	}
	return out, nil
}

func uniq(ids []ID) []ID {
	seen := make(map[ID]bool, len(ids))
	out := make([]ID, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func corrupt(msg string) *belay.Error {
	return belay.Errorf(belay.CodeCheckpointCorrupt, "%s", msg)
}

// Sweeper is what Sweep needs of a driver, inside one write transaction
// during which no Save may commit a root whose chunks Sweep has not seen:
// SQLite has one writer; PostgreSQL locks the table of chunks (a save in
// ROW EXCLUSIVE mode before Missing, the sweep in SHARE ROW EXCLUSIVE mode
// before Roots), so a save waits for the sweep and then stores again what
// it deleted, or the sweep waits for the save and then sees its root.
type Sweeper interface {
	Store
	// Roots returns every root stored in place of a state.
	Roots(ctx context.Context) ([][]byte, error)
	// Sizes returns the size of every stored chunk.
	Sizes(ctx context.Context) (map[ID]int64, error)
	// Delete removes chunks.
	Delete(ctx context.Context, ids []ID) error
}

// Sweep deletes every chunk that no root refers to, or with dryRun only
// counts them, and returns how many chunks and bytes that is. A root it
// cannot follow (a missing index chunk) stops it with CHECKPOINT_CORRUPTED
// before it deletes anything.
func Sweep(ctx context.Context, s Sweeper, dryRun bool) (chunks, bytes int64, err error) {
	roots, err := s.Roots(ctx)
	if err != nil {
		return 0, 0, err
	}
	live, expanded := map[ID]bool{}, map[ID]bool{}
	for _, b := range roots {
		if err := mark(ctx, s, b, live, expanded); err != nil {
			return 0, 0, err
		}
	}
	sizes, err := s.Sizes(ctx)
	if err != nil {
		return 0, 0, err
	}
	var dead []ID
	for id, size := range sizes {
		if !live[id] {
			dead = append(dead, id)
			chunks, bytes = chunks+1, bytes+size
		}
	}
	if dryRun || len(dead) == 0 {
		return chunks, bytes, nil
	}
	slices.SortFunc(dead, func(a, b ID) int { return slices.Compare(a[:], b[:]) })
	return chunks, bytes, s.Delete(ctx, dead)
}

// mark adds every chunk the root b refers to to live. An index chunk in
// expanded was followed already, and so was everything below it.
func mark(ctx context.Context, s Store, b []byte, live, expanded map[ID]bool) error {
	r, err := parseRoot(b)
	if err != nil {
		return err
	}
	ids := r.ids
	for level := r.depth; level > 0; level-- {
		var follow []ID
		for _, id := range ids {
			live[id] = true
			if !expanded[id] {
				expanded[id] = true
				follow = append(follow, id)
			}
		}
		if len(follow) == 0 {
			return nil
		}
		data, err := fetch(ctx, s, follow, len(ID{})*maxIDs(r.length))
		if err != nil {
			return err
		}
		var ok bool
		if ids, ok = splitIDs(data); !ok {
			return corrupt("an index chunk of a state is malformed")
		}
	}
	for _, id := range ids {
		live[id] = true
	}
	return nil
}

// Unreadable returns err as the error of a state Load could not rebuild
// (a chunk missing or damaged), whose says whose state it is, and true; or
// err and false when err is not that (a failed query, say).
func Unreadable(err error, whose string) (*belay.Error, bool) {
	var e *belay.Error
	if !errors.As(err, &e) || e.Code != belay.CodeCheckpointCorrupt {
		return nil, false
	}
	u := e.With("reason", e.Message)
	u.Message = fmt.Sprintf("the agent state of %s cannot be read back: %s; run `belay validate` to see how to recover", whose, e.Message)
	return u, true
}

// Length returns the length of the state stored as stored without reading
// its chunks or decompressing it: the length a root or a compressed state
// declares, else (a state stored as it is, or a damaged root or header) the
// length of stored. Of a compressed state, its first LengthPrefix bytes are
// enough.
func Length(stored []byte) int {
	if length, _, ok := compressedLength(stored); ok {
		return length
	}
	if r, err := parseRoot(stored); err == nil {
		return r.length
	}
	return len(stored)
}

// LengthPrefix is how many of a compressed state's first bytes Length needs.
const LengthPrefix = 1 + binary.MaxVarintLen64
