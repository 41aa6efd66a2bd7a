// Package version says which thindist this is, for --version and for the
// record of every run, whichever entry point runs it (the command or the
// linker plugin, which are built separately).
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Version is set at build time with
// -ldflags "-X github.com/thindist/thindist/internal/sys/version.Version=...".
var Version = "dev"

// Line is thindist's version (Short) and the Go version.
func Line() string {
	return "thindist " + Short() + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// Short is thindist's version: the one set at build time, else the
// module's (go install ...@v1.2.3, or the pseudo-version `go build` gives
// a git checkout), then what the build recorded of the checkout: its
// commit, the commit's time and whether the tree had changes. A build
// that recorded nothing says so, and why that usually is. Read once:
// every remote call names it.
var Short = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return describe(Version, "", nil)
	}
	return describe(Version, bi.Main.Version, bi.Settings)
})

// describe is Short of a build: set is the version set at build time,
// module the main module's version, settings the build's.
func describe(set, module string, settings []debug.BuildSetting) string {
	v := set
	if v == "dev" && module != "" && module != "(devel)" {
		v = module
	}
	var rev, when string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if v == "dev" {
			v += " (no commit recorded: built outside a git checkout, or with -buildvcs=false)"
		}
		return v
	}
	// A pseudo-version already ends in the commit; "+dirty" says what
	// "modified" says below.
	v = strings.TrimSuffix(v, "+dirty")
	detail := "commit " + rev
	if when != "" {
		detail += " of " + when
	}
	if modified {
		detail += ", with uncommitted changes"
	}
	return v + " (" + detail + ")"
}
