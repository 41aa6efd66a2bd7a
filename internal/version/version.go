// Package version says which thindist this is, for --version and for the
// record of every run, whichever entry point runs it (the command or the
// linker plugin, which are built separately).
package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is set at build time with
// -ldflags "-X github.com/thindist/thindist/internal/version.Version=...".
var Version = "dev"

// Line is thindist's version (Short) and the Go version.
func Line() string {
	return "thindist " + Short() + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// Short is thindist's version: the one set at build time, else the
// module's (go install ...@v1.2.3), with the VCS revision of a source
// build. Read once: every remote call names it.
var Short = sync.OnceValue(short)

func short() string {
	v := Version
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(12, len(s.Value))]
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && modified {
			rev += ", modified"
		}
	}
	if rev != "" {
		v += " (" + rev + ")"
	}
	return v
}
