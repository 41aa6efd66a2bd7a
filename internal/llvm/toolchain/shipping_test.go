package toolchain

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippingCannotShip: under CLANG_SPAWN_CC1 nothing is shipped, said
// once; a compiler whose tree cannot be built is not shipped, said once
// however often it is asked for, and keeps its identity; a nil Shipping
// keeps every identity.
func TestShippingCannotShip(t *testing.T) {
	var warnings []string
	warn := func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
	spawn := func(name string) string {
		if name == "CLANG_SPAWN_CC1" {
			return "1"
		}
		return ""
	}
	if s := NewShipping(spawn, nil, warn); s != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "CLANG_SPAWN_CC1 is set") {
		t.Errorf("under CLANG_SPAWN_CC1: %v, warnings %q; want nothing shipped, said once", s, warnings)
	}
	var none *Shipping
	id := func(c string) (string, error) { return "id of " + c, nil }
	if got, _ := none.Identify(id)("cc"); got != "id of cc" || none.Shipped() != nil {
		t.Errorf("a nil Shipping: identity %q, Shipped set %v", got, none.Shipped() != nil)
	}

	warnings = nil
	s := NewShipping(func(string) string { return "" }, nil, warn)
	missing := filepath.Join(t.TempDir(), "no-such-clang")
	for range 2 {
		if tree := s.Shipped()(missing); tree != nil {
			t.Errorf("a missing compiler shipped: %+v", tree)
		}
		if got, err := s.Identify(id)(missing); err != nil || got != "id of "+missing {
			t.Errorf("a compiler not shipped is identified as %q, %v; want its own identity", got, err)
		}
	}
	if len(warnings) != 1 || !strings.HasSuffix(warnings[0], "; the workers run their installed compiler (--remote-toolchain=installed)") {
		t.Errorf("warnings %q; want one that the workers run their installed compiler", warnings)
	}
}
