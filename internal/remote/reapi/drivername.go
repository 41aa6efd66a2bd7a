package reapi

import (
	"path/filepath"
	"strings"
)

// driverName is the name a cache key gives the compiler at path: its base
// name as far as clang reads it. clang takes from its program name only its
// driver mode and a target prefix ("x86_64-linux-gnu-clang++"), after
// dropping a version suffix ("clang-22", "clang++22", "clang-cl-22.1";
// clang/lib/Driver/ToolChain.cpp, parseDriverSuffix), and the compiler's
// identity is in the key's salt; so "clang-22" and "clang" (what lld's
// DTLTO names, clang's own executable, where `thindist link` names the
// link's driver as spelled) are one compiler, and the two entry points give
// the same backend the same key. A name clang does not recognise (a wrapper
// script's) is kept whole.
func driverName(path string) string {
	name := filepath.Base(path)
	for _, try := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimSuffix(s, ".exe") },
		func(s string) string { return strings.TrimRight(s, "0123456789.") },
		func(s string) string {
			if i := strings.LastIndexByte(s, '-'); i >= 0 {
				return s[:i]
			}
			return s
		},
	} {
		// Each step works on what the one before left, as clang's.
		name = try(name)
		for _, suffix := range driverSuffixes {
			if strings.HasSuffix(name, suffix) {
				return name
			}
		}
	}
	return filepath.Base(path)
}

// driverSuffixes are the program names clang recognises, with the driver
// mode each implies, in clang's order (ToolChain.cpp, DriverSuffixes).
var driverSuffixes = []string{
	"clang", "clang++", "clang-c++", "clang-cc", "clang-cpp", "clang-g++", "clang-gcc", "clang-cl",
	"cc", "cpp", "cl", "++", "flang", "flang-new", "clang-dxc",
}
