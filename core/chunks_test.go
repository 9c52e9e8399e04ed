package core_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// largeState is a JSON agent state of about n KiB of random text.
func largeState(t *testing.T, seed uint64, n int) json.RawMessage {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0))
	docs := make([]string, n)
	for i := range docs {
		b := make([]byte, 1000)
		for j := range b {
			b[j] = 'a' + byte(r.IntN(26))
		}
		docs[i] = string(b)
	}
	b, err := json.Marshal(map[string]any{"docs": docs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCollectGarbageSweepsStateChunks: the chunks of a large state outlive
// the checkpoints that used them until gc, which frees exactly those no
// checkpoint refers to any more; du counts them.
func TestCollectGarbageSweepsStateChunks(t *testing.T) {
	e := newWSEnv(t)
	kept, gone := largeState(t, 1, 300), largeState(t, 2, 300)
	for _, dir := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(e.project, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	save := func(project string, state json.RawMessage) *belay.Checkpoint {
		t.Helper()
		cp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{ProjectPath: project, Summary: "step", AgentState: state})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	keep := save(e.project+"/a", kept)
	drop := save(e.project+"/b", gone)
	save(e.project+"/b", kept) // shares every chunk of keep

	du, err := e.svc.DiskUsage(admin)
	// Chunks are compressed: the text of 26 letters shrinks by about 40%.
	if err != nil || du.StateChunkBytes < int64(len(kept)+len(gone))/2 || du.StateChunkBytes > int64(len(kept)+len(gone)) {
		t.Fatalf("du = %+v, %v; want the chunks of two states of %d bytes", du, err, len(kept))
	}
	if _, err := e.svc.DeleteSession(alice, drop.SessionID); err != nil {
		t.Fatal(err)
	}
	dry, err := e.svc.CollectGarbage(admin, belay.GCInput{DryRun: true})
	if err != nil || dry.StateChunks == 0 || dry.StateBytes < du.StateChunkBytes*45/100 || dry.StateBytes > du.StateChunkBytes*55/100 {
		t.Fatalf("dry run = %+v, %v; want about half of the %d bytes of chunks (one of two states)", dry, err, du.StateChunkBytes)
	}
	if again, _ := e.svc.DiskUsage(admin); again.StateChunkBytes != du.StateChunkBytes {
		t.Fatalf("the dry run freed chunks: %d, was %d", again.StateChunkBytes, du.StateChunkBytes)
	}
	rep, err := e.svc.CollectGarbage(admin, belay.GCInput{})
	if err != nil || rep.StateChunks != dry.StateChunks || rep.StateBytes != dry.StateBytes || rep.FreedBytes < rep.StateBytes {
		t.Fatalf("gc = %+v, %v; the dry run said %+v", rep, err, dry)
	}
	if after, _ := e.svc.DiskUsage(admin); after.StateChunkBytes != du.StateChunkBytes-rep.StateBytes {
		t.Fatalf("du after gc: %d chunk bytes, want %d", after.StateChunkBytes, du.StateChunkBytes-rep.StateBytes)
	}
	got, err := e.svc.GetCheckpoint(alice, keep.ID)
	if err != nil || !bytes.Equal(got.AgentState, kept) {
		t.Fatalf("the kept checkpoint after gc: %v", err)
	}
	if again, err := e.svc.CollectGarbage(admin, belay.GCInput{}); err != nil || again.StateChunks != 0 {
		t.Fatalf("a second gc = %+v, %v", again, err)
	}
}

// TestExportImportCarriesLargeStates: an archive holds every state whole,
// and the import stores it as chunks again.
func TestExportImportCarriesLargeStates(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	state := largeState(t, 3, 200)
	cp := src.save(t, "large", func(in *belay.CreateCheckpointInput) { in.AgentState = state })
	archive := src.export(t, cp.SessionID)
	var inArchive struct{ AgentState json.RawMessage }
	for _, e := range wsUntar(t, archive) {
		if strings.HasPrefix(e.hdr.Name, "cp-01") {
			if err := json.Unmarshal(e.data, &inArchive); err != nil {
				t.Fatal(err)
			}
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, inArchive.AgentState); err != nil || !bytes.Equal(compact.Bytes(), state) {
		t.Fatalf("the archive holds a state of %d bytes, want the %d bytes saved (%v)", compact.Len(), len(state), err)
	}
	dst := newWSEnv(t)
	if _, err := dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	got, err := dst.svc.GetCheckpoint(admin, cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	compact.Reset()
	if err := json.Compact(&compact, got.AgentState); err != nil || !bytes.Equal(compact.Bytes(), state) {
		t.Fatalf("the imported state is %d bytes, want %d (%v)", compact.Len(), len(state), err)
	}
	if du, err := dst.svc.DiskUsage(admin); err != nil || du.StateChunkBytes < int64(len(state))/2 {
		t.Fatalf("the import stored %+v, %v; want the state in chunks", du, err)
	}
}
