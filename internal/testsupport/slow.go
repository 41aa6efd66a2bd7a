// Package testsupport holds what the tests of many packages share; its
// subpackages are the test doubles (reapitest, reapisim), the program
// generator (testprog) and the real projects (realproj).
//
// The suite has two tiers (docs/testing.md): `go test -short ./...`, the
// fast one, runs the unit tests; `go test ./...` runs everything, the real
// compiles and links with clang among it.
package testsupport

import "testing"

// Slow puts t in the full tier only: under `go test -short` it skips t,
// saying what t does (what: "links lua5.4 four times with clang 22"), and
// otherwise returns, so that the full suite runs t as it always has. Tests
// call it first, before the work it names.
func Slow(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow, not run with -short: " + what)
	}
}
