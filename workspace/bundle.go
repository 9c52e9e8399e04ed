package workspace

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// InvalidBundle: a git bundle's header is damaged or too large, or the
// bundle needs what ReadBundleHeader refuses (prerequisites, capabilities
// other than SHA-1 object names).
const InvalidBundle Code = "InvalidBundle"

// MaxBundleHeader bounds the header ReadBundleHeader reads: 100,000 refs of
// belay's form take about 11 MB.
const MaxBundleHeader = 16 << 20

// maxBundleLine bounds one line of a bundle's header.
const maxBundleLine = 64 << 10

// ReadBundleHeader reads the header of the git bundle r streams (v2, or v3
// with SHA-1 object names) and returns its refs mapped to their commits, and
// a reader of the whole bundle, header included, to write it out once the
// refs are checked. It reads no more of r than the header and one buffer. A
// bundle listing prerequisites (commits it does not hold) or another
// capability, or whose header is damaged or larger than MaxBundleHeader, is
// an *Error with code InvalidBundle; an error reading r is returned wrapped.
func ReadBundleHeader(r io.Reader) (map[string]string, io.Reader, error) {
	br := bufio.NewReaderSize(r, maxBundleLine)
	var header bytes.Buffer
	line := func() (string, error) {
		l, err := br.ReadSlice('\n')
		header.Write(l)
		switch {
		case err == nil && header.Len() <= MaxBundleHeader:
			return strings.TrimSuffix(string(l), "\n"), nil
		case err == nil:
			return "", errorf(InvalidBundle, nil, "the bundle's header is larger than %d bytes", MaxBundleHeader)
		case errors.Is(err, io.EOF), errors.Is(err, bufio.ErrBufferFull):
			return "", errorf(InvalidBundle, nil, "the bundle has a damaged header")
		}
		return "", fmt.Errorf("read bundle header: %w", err)
	}
	sig, err := line()
	if err != nil {
		return nil, nil, err
	}
	if sig != "# v2 git bundle" && sig != "# v3 git bundle" {
		return nil, nil, errorf(InvalidBundle, nil, "not a git bundle")
	}
	refs := map[string]string{}
	for {
		l, err := line()
		if err != nil {
			return nil, nil, err
		}
		switch {
		case l == "":
			return refs, io.MultiReader(&header, br), nil
		case strings.HasPrefix(l, "@"):
			if sig != "# v3 git bundle" || l != "@object-format=sha1" {
				return nil, nil, errorf(InvalidBundle, nil, "the bundle needs an unsupported capability %.80q", l)
			}
		case strings.HasPrefix(l, "-"):
			return nil, nil, errorf(InvalidBundle, nil, "the bundle depends on commits it does not hold")
		default:
			oid, ref, ok := strings.Cut(l, " ")
			if _, err := hex.DecodeString(oid); !ok || err != nil || len(oid) != 40 || refs[ref] != "" {
				return nil, nil, errorf(InvalidBundle, nil, "the bundle has a damaged header")
			}
			refs[ref] = oid
		}
	}
}
