package workspace

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// TestGitErrorCarriesStorageFaults: a storage fault git reports only by its
// text on stderr is the errno to callers, as belay's own writes' are.
func TestGitErrorCarriesStorageFaults(t *testing.T) {
	for stderr, want := range map[string]error{
		"error: unable to write file .git/objects/ab/cd: No space left on device\nfatal: unable to write new index file\n": syscall.ENOSPC,
		"fatal: unable to create '/d/repo.git/index.lock': Read-only file system\n":                                        syscall.EROFS,
		"fatal: packfile /d/pack-1.pack cannot be accessed: Input/output error\n":                                          syscall.EIO,
		"fatal: could not write: Disk quota exceeded\n":                                                                    syscall.EDQUOT,
	} {
		err := error(&gitError{args: []string{"update-index"}, stderr: stderr, err: &exec.ExitError{}})
		if !errors.Is(err, want) {
			t.Errorf("%q is not %v", stderr, want)
		}
	}
	if err := error(&gitError{args: []string{"rev-parse"}, stderr: "fatal: bad revision\n", err: &exec.ExitError{}}); errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v is ENOSPC", err)
	}
}
