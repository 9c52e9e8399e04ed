package chunkstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/belayhq/belay"
)

// memStore is a Sweeper in memory.
type memStore struct {
	chunks map[ID][]byte
	roots  [][]byte
	puts   int
}

func newMem() *memStore { return &memStore{chunks: map[ID][]byte{}} }

func (m *memStore) Get(_ context.Context, ids []ID) (map[ID][]byte, error) {
	out := map[ID][]byte{}
	for _, id := range ids {
		if b, ok := m.chunks[id]; ok {
			out[id] = b
		}
	}
	return out, nil
}

func (m *memStore) Missing(_ context.Context, ids []ID) ([]ID, error) {
	var out []ID
	for _, id := range ids {
		if _, ok := m.chunks[id]; !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

func (m *memStore) Put(_ context.Context, chunks []Chunk) error {
	for _, c := range chunks {
		if _, ok := m.chunks[c.ID]; !ok {
			m.chunks[c.ID] = bytes.Clone(c.Data)
			m.puts += len(c.Data)
		}
	}
	return nil
}

func (m *memStore) Roots(context.Context) ([][]byte, error) { return m.roots, nil }

func (m *memStore) Sizes(context.Context) (map[ID]int64, error) {
	out := map[ID]int64{}
	for id, b := range m.chunks {
		out[id] = int64(len(b))
	}
	return out, nil
}

func (m *memStore) Delete(_ context.Context, ids []ID) error {
	for _, id := range ids {
		delete(m.chunks, id)
	}
	return nil
}

func randomState(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}

// incompressible returns n bytes DEFLATE cannot shrink, beginning as JSON
// may.
func incompressible(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] = '"'
	return b
}

func TestSmallStateStaysInline(t *testing.T) {
	m := newMem()
	for _, state := range [][]byte{nil, []byte(`{}`), randomState(1, CompressMin-1), incompressible(2, InlineMax)} {
		got, err := Save(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, state) || !Plain(got) || len(m.chunks) != 0 {
			t.Fatalf("a state of %d bytes was not stored as it is", len(state))
		}
		p, err := Prepare(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		if len(state) < CompressMin {
			if p != nil {
				t.Fatalf("Prepare of a state of %d bytes = %v; want nil: there is nothing to do", len(state), p)
			}
			continue
		}
		// Compressing it was tried, and its save need not try again.
		if b, err := p.Save(t.Context(), m); err != nil || !bytes.Equal(b, state) || len(m.chunks) != 0 {
			t.Fatalf("the prepared save of a state of %d bytes stored %d bytes, %v; want the state as it is", len(state), len(b), err)
		}
	}
}

// TestCompressedStateStaysInline: a state from CompressMin to InlineMax
// bytes that compresses is kept in its row compressed, declaring its length
// in its first LengthPrefix bytes, and Prepare does the compression Save
// would.
func TestCompressedStateStaysInline(t *testing.T) {
	m := newMem()
	for _, state := range [][]byte{randomState(3, CompressMin), randomState(4, InlineMax)} {
		stored, err := Save(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		if Plain(stored) || IsRoot(stored) || len(stored) > len(state)*3/4 || len(m.chunks) != 0 {
			t.Fatalf("a state of %d bytes was stored in %d bytes (plain %v, root %v) and %d chunks; want compressed in its row",
				len(state), len(stored), Plain(stored), IsRoot(stored), len(m.chunks))
		}
		if n, head := Length(stored), Length(stored[:LengthPrefix]); n != len(state) || head != len(state) {
			t.Fatalf("Length = %d, of its first %d bytes %d; want %d", n, LengthPrefix, head, len(state))
		}
		got, err := Load(t.Context(), m, stored)
		if err != nil || !bytes.Equal(got, state) {
			t.Fatalf("Load: %d bytes, %v; want the state of %d bytes", len(got), err, len(state))
		}
		p, err := Prepare(t.Context(), m, state)
		if err != nil || !p.For(state) {
			t.Fatalf("Prepare = %v, %v", p, err)
		}
		if prepared, err := p.Save(t.Context(), m); err != nil || !bytes.Equal(prepared, stored) || cap(prepared) != len(prepared) {
			t.Fatalf("the prepared save stored %d bytes (capacity %d), %v; Save stored %d", len(prepared), cap(prepared), err, len(stored))
		}
		if len(m.chunks) != 0 {
			t.Fatalf("a compressed state stored %d chunks", len(m.chunks))
		}
	}
}

// TestDamagedLengthAllocatesLittle: a damaged header declaring a huge length
// fails before Load allocates for it.
func TestDamagedLengthAllocatesLittle(t *testing.T) {
	stored := append(binary.AppendUvarint([]byte{compressedMarker}, 256<<20), make([]byte, 16)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(t.Context(), newMem(), stored)
	runtime.ReadMemStats(&after)
	if code := belay.ErrorCode(err); code != belay.CodeCheckpointCorrupt {
		t.Fatalf("Load of a header declaring 256 MiB: %v, want CHECKPOINT_CORRUPTED", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("Load of a header declaring 256 MiB allocated %d bytes", n)
	}
}

// TestDamagedCompressedStateIsCoded: a compressed state damaged anywhere is
// CHECKPOINT_CORRUPTED, never another state.
func TestDamagedCompressedStateIsCoded(t *testing.T) {
	state := randomState(6, 8<<10)
	stored, err := Save(t.Context(), newMem(), state)
	if err != nil || Plain(stored) {
		t.Fatalf("Save: plain %v, %v", Plain(stored), err)
	}
	_, sum, _ := compressedLength(stored)
	for name, damage := range map[string]func([]byte) []byte{
		"marker alone":     func(b []byte) []byte { return b[:1] },
		"truncated header": func(b []byte) []byte { return b[:sum+2] },
		"truncated stream": func(b []byte) []byte { return b[:len(b)-len(b)/3] },
		"longer length": func(b []byte) []byte {
			return append(binary.AppendUvarint([]byte{1}, uint64(len(state)+1)), b[sum:]...)
		},
		"impossible length":    func(b []byte) []byte { return append(binary.AppendUvarint([]byte{1}, InlineMax+1), b[sum:]...) },
		"flipped checksum":     func(b []byte) []byte { b[sum] ^= 1; return b },
		"flipped stream byte":  func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b },
		"garbage after stream": func(b []byte) []byte { return append(b, 1, 2, 3) },
	} {
		t.Run(name, func(t *testing.T) {
			b := damage(bytes.Clone(stored))
			got, err := Load(t.Context(), newMem(), b)
			if code := belay.ErrorCode(err); code != belay.CodeCheckpointCorrupt {
				t.Fatalf("Load of a damaged compressed state: %d bytes, %v (code %q); want CHECKPOINT_CORRUPTED", len(got), err, code)
			}
		})
	}
}

// TestStateLikeARootIsChunked: a small state that begins with a zero byte
// (no JSON does) is not stored as it is, where it would read as a root.
func TestStateLikeARootIsChunked(t *testing.T) {
	m := newMem()
	state := []byte{0, 1, 2}
	stored, err := Save(t.Context(), m, state)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(stored, state) || !IsRoot(stored) {
		t.Fatalf("stored %v as %v", state, stored)
	}
	if got, err := Load(t.Context(), m, stored); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("loaded %v, %v", got, err)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{InlineMax + 1, 200 << 10, 1 << 20, 8 << 20} {
		m := newMem()
		state := randomState(uint64(n), n)
		root, err := Save(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		if !IsRoot(root) || len(root) > 2+10+maxRootIDs*32 {
			t.Fatalf("%d bytes: root of %d bytes", n, len(root))
		}
		got, err := Load(t.Context(), m, root)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, state) {
			t.Fatalf("%d bytes: state differs after the round trip", n)
		}
	}
}

// TestEditCostsAboutTheEdit is the case in memory: 100 versions of
// a 1 MB state, each changing 1 KB somewhere, store about the changes.
func TestEditCostsAboutTheEdit(t *testing.T) {
	m := newMem()
	state := randomState(7, 1<<20)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 100 {
		if i > 0 {
			at := r.IntN(len(state) - 1024)
			copy(state[at:], randomState(uint64(i), 1024))
		}
		root, err := Save(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		m.roots = append(m.roots, root)
	}
	growth := m.puts - len(state)
	t.Logf("first version %d bytes, 99 edits of 1 KiB stored %d bytes (%d per edit) in %d chunks", len(state), growth, growth/99, len(m.chunks))
	if growth > 1<<20 {
		t.Fatalf("99 edits of 1 KiB stored %d bytes", growth)
	}
	if n, _, err := Sweep(t.Context(), m, false); err != nil || n != 0 {
		t.Fatalf("sweep with every root alive deleted %d chunks (%v)", n, err)
	}
}

func TestInsertShiftsOnlyNearbyChunks(t *testing.T) {
	m := newMem()
	state := randomState(3, 1<<20)
	if _, err := Save(t.Context(), m, state); err != nil {
		t.Fatal(err)
	}
	before := m.puts
	edited := append(append(append([]byte{}, state[:500000]...), []byte("inserted text")...), state[500000:]...)
	if _, err := Save(t.Context(), m, edited); err != nil {
		t.Fatal(err)
	}
	if added := m.puts - before; added > 48<<10 {
		t.Fatalf("inserting 13 bytes stored %d bytes", added)
	}
}

func TestCorruptionIsCoded(t *testing.T) {
	state := randomState(5, 300<<10)
	for name, damage := range map[string]func(m *memStore, root []byte){
		"flipped byte": func(m *memStore, _ []byte) {
			for id, b := range m.chunks {
				b = bytes.Clone(b)
				b[len(b)/2] ^= 1
				m.chunks[id] = b
				return
			}
		},
		"missing chunk": func(m *memStore, _ []byte) {
			for id := range m.chunks {
				delete(m.chunks, id)
				return
			}
		},
		"truncated root": func(_ *memStore, root []byte) { root[len(root)-1] ^= 0xff },
	} {
		t.Run(name, func(t *testing.T) {
			m := newMem()
			root, err := Save(t.Context(), m, state)
			if err != nil {
				t.Fatal(err)
			}
			damage(m, root)
			_, err = Load(t.Context(), m, root)
			if code := belay.ErrorCode(err); code != belay.CodeCheckpointCorrupt {
				t.Fatalf("load of a damaged state: %v (code %q), want CHECKPOINT_CORRUPTED", err, code)
			}
		})
	}
}

func TestSweepKeepsWhatRootsReach(t *testing.T) {
	m := newMem()
	a, b := randomState(1, 1<<20), randomState(1, 1<<20)
	copy(b[1000:], "a change in the middle of b")
	rootA, _ := Save(t.Context(), m, a)
	rootB, _ := Save(t.Context(), m, b)
	m.roots = [][]byte{rootB}
	n, size, err := Sweep(t.Context(), m, true)
	if err != nil || n == 0 || size == 0 {
		t.Fatalf("dry run: %d chunks, %d bytes, %v", n, size, err)
	}
	if _, err := Load(t.Context(), m, rootA); err != nil {
		t.Fatalf("a dry run deleted: %v", err)
	}
	if n2, size2, err := Sweep(t.Context(), m, false); err != nil || n2 != n || size2 != size {
		t.Fatalf("sweep: %d chunks, %d bytes, %v; dry run said %d, %d", n2, size2, err, n, size)
	}
	if got, err := Load(t.Context(), m, rootB); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("the live state after the sweep: %v", err)
	}
	if _, err := Load(t.Context(), m, rootA); belay.ErrorCode(err) != belay.CodeCheckpointCorrupt {
		t.Fatalf("the swept state still loads: %v", err)
	}
	m.roots = nil
	if _, _, err := Sweep(t.Context(), m, false); err != nil || len(m.chunks) != 0 {
		t.Fatalf("sweeping with no roots left %d chunks (%v)", len(m.chunks), err)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint32(100<<10), uint32(0), []byte("edit"))
	f.Add(uint64(2), uint32(InlineMax+1), uint32(5), []byte{})
	f.Fuzz(func(t *testing.T, seed uint64, size uint32, at uint32, edit []byte) {
		state := randomState(seed, int(size%(3<<20)))
		if len(state) > 0 {
			copy(state[int(at)%len(state):], edit)
		}
		m := newMem()
		stored, err := Save(t.Context(), m, state)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Load(t.Context(), m, stored)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, state) {
			t.Fatalf("state of %d bytes differs after the round trip", len(state))
		}
	})
}

// FuzzLoad hands Load damaged roots and chunks: it must return a state or
// CHECKPOINT_CORRUPTED, never panic. (A made-up root may name a run of this
// store's chunks that adds up to its length: that is a state whose every
// chunk matches its hash, which the checkpoint's checksum then compares.)
func FuzzLoad(f *testing.F) {
	state := randomState(9, 100<<10)
	saved := newMem()
	root, err := Save(context.Background(), saved, state)
	if err != nil {
		f.Fatal(err)
	}
	ids := make([]ID, 0, len(saved.chunks))
	for id := range saved.chunks {
		ids = append(ids, id)
	}
	f.Add(root, -1, byte(0))
	f.Add(root, 3, byte(1))
	f.Add([]byte{0, 9, 0xff, 0xff, 0xff, 0xff, 0x0f}, 0, byte(0))
	compressed, err := Save(context.Background(), saved, randomState(10, 4<<10))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(compressed, -1, byte(0))
	f.Add([]byte{1, 0x80, 0x80, 0x04, 0, 0, 0, 0}, -1, byte(0))
	f.Fuzz(func(t *testing.T, root []byte, chunk int, flip byte) {
		m := newMem()
		maps.Copy(m.chunks, saved.chunks)
		if chunk >= 0 {
			id := ids[chunk%len(ids)]
			b := bytes.Clone(m.chunks[id])
			b[int(flip)%len(b)] ^= flip
			m.chunks[id] = b
		}
		got, err := Load(t.Context(), m, root)
		var be *belay.Error
		switch {
		case err != nil && (!errors.As(err, &be) || be.Code != belay.CodeCheckpointCorrupt):
			t.Fatalf("Load: %v, want CHECKPOINT_CORRUPTED", err)
		case err == nil && Plain(root) && !bytes.Equal(got, root):
			t.Fatal("a state stored as it is came back changed")
		}
	})
}

// TestPreparedSavesWhatSaveSaves: a state prepared before the transaction
// stores the same chunks and root as Save; only the chunks missing when it
// was prepared are compressed then, and one deleted between the two (a
// sweep) is stored all the same.
func TestPreparedSavesWhatSaveSaves(t *testing.T) {
	ctx := t.Context()
	if p, err := Prepare(ctx, newMem(), []byte(`{"small":true}`)); p != nil || err != nil {
		t.Fatalf("Prepare of a small state = %v, %v; want nil: it is stored as it is", p, err)
	}
	state := randomState(11, 1<<20)
	prepared, saved := newMem(), newMem()
	p, err := Prepare(ctx, prepared, state)
	if err != nil {
		t.Fatal(err)
	}
	if !p.For(state) || p.For(bytes.Clone(state)) {
		t.Error("For: want true for the state prepared, false for a copy")
	}
	root, err := p.Save(ctx, prepared)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Save(ctx, saved, state)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root, want) || !maps.EqualFunc(prepared.chunks, saved.chunks, bytes.Equal) {
		t.Fatalf("prepared: root %x, %d chunks; Save: root %x, %d chunks", root[:8], len(prepared.chunks), want[:8], len(saved.chunks))
	}

	// The next version: only the chunks around the edit are compressed.
	edited := bytes.Clone(state)
	copy(edited[500<<10:], randomState(12, 1<<10))
	p, err = Prepare(ctx, prepared, edited)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.stored) == 0 || len(p.stored) > 8 {
		t.Errorf("%d chunks compressed for an edit of 1 KiB of %d chunks; want the few around it", len(p.stored), len(p.chunks))
	}
	for id, b := range p.stored {
		if cap(b) != len(b) {
			t.Errorf("chunk %x kept in %d bytes for a stored form of %d", id[:4], cap(b), len(b))
		}
	}
	// A sweep deletes a chunk the edit shares with the state before.
	var shared ID
	for _, c := range p.chunks {
		if _, ok := p.stored[c.ID]; !ok {
			shared = c.ID
			break
		}
	}
	delete(prepared.chunks, shared)
	root, err = p.Save(ctx, prepared)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(ctx, prepared, root)
	if err != nil || !bytes.Equal(got, edited) {
		t.Fatalf("Load after the sweep: %d bytes, %v; want the edited state", len(got), err)
	}
}
