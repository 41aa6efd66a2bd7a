package reapi

import (
	"fmt"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// NotCached is the error Keyer.Key returns for an action that must not be
// served from or stored in a cache: its command asks the compiler for
// files beside its object (--save-temps' .s and .bc files, an
// optimization record, a time trace, a .dwo, a dependency file), which a
// cache hit would not write. The action runs every time.
type NotCached struct {
	// Option is the first option of the command that asks for side files.
	Option string
}

func (e *NotCached) Error() string {
	return fmt.Sprintf("not cached: %s writes side files", e.Option)
}

// SideFiles returns the first option of a's command that makes clang write
// files besides its declared outputs, or "" if none does. Options that only
// print (-Rpass*, -ftime-report, warnings) are not among them: a hit replays
// what the compile printed.
func SideFiles(a *action.Action) string {
	for i, arg := range a.Args {
		if arg.Kind != action.Literal || i == 0 {
			continue
		}
		if sideFileOption(arg.Text) {
			return arg.Text
		}
	}
	return ""
}

// sideFileOption reports whether clang option s asks for a side file.
func sideFileOption(s string) bool {
	if strings.HasPrefix(s, "--") {
		s = s[1:] // clang takes --save-temps as -save-temps
	}
	switch {
	case s == "-save-temps", strings.HasPrefix(s, "-save-temps="),
		s == "-save-stats", strings.HasPrefix(s, "-save-stats="),
		s == "-fsave-optimization-record", strings.HasPrefix(s, "-fsave-optimization-record="),
		strings.HasPrefix(s, "-foptimization-record-file="),
		s == "-ftime-trace", strings.HasPrefix(s, "-ftime-trace="),
		s == "-gsplit-dwarf", strings.HasPrefix(s, "-gsplit-dwarf="),
		s == "-fstack-usage", s == "-fproc-stat-report", strings.HasPrefix(s, "-fproc-stat-report="),
		s == "-MD", s == "-MMD", s == "-MF", strings.HasPrefix(s, "-MF"), s == "-MJ", strings.HasPrefix(s, "-MJ"),
		s == "-dependency-file", strings.HasPrefix(s, "-dependency-file="):
		return true
	}
	return false
}
