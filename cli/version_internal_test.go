package cli

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: a version set at build time wins; otherwise the module
// version the go command recorded (go install …@v1.2.0, or a pseudo-version
// from the commit); a plain `go run` in a checkout says dev.
func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		set, module, want string
	}{
		{"v1.0.0", "v1.2.0", "v1.0.0"},
		{"dev", "v1.2.0", "v1.2.0"},
		{"dev", "v0.0.0-20260102030405-abcdefabcdef", "v0.0.0-20260102030405-abcdefabcdef"},
		{"dev", "(devel)", "dev"},
		{"dev", "", "dev"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/belayhq/belay", Version: tc.module}}
		if got := versionOf(tc.set, bi); got != tc.want {
			t.Errorf("versionOf(%q, module %q) = %q, want %q", tc.set, tc.module, got, tc.want)
		}
	}
}
