package executor

import (
	"context"
	"testing"
)

// TestDescribe: a chain describes itself from the values its decorators
// report (names, notes, what each wraps), as a tree and, for logs, as its
// String, one line.
func TestDescribe(t *testing.T) {
	local := NewLocal(LocalOptions{Limiter: grantedSlot{}, Nice: 10})
	ex := Metered(NewFallback(Verified(Func(nil)), Verified(local), FallbackOptions{}))
	want := `Metered
  Fallback
    Verified
      executor.Func
    Verified
      Local[granted slot; nice 10]
`
	if got := Describe(ex); got != want {
		t.Errorf("Describe:\n%s\nwant\n%s", got, want)
	}
	line := "Metered(Fallback(Verified(executor.Func), Verified(Local[granted slot; nice 10])))"
	if got := ex.(interface{ String() string }).String(); got != line {
		t.Errorf("String: %s\nwant %s", got, line)
	}
	if got := NewLocal(LocalOptions{}).(interface{ String() string }).String(); got != "Local" {
		t.Errorf("a plain local executor's String is %q, want Local", got)
	}
}

// grantedSlot is a Limiter that names itself as a scheduler's granted
// slot does (dispatch.Granted).
type grantedSlot struct{}

func (grantedSlot) Acquire(context.Context) (func(), error) { return func() {}, nil }
func (grantedSlot) String() string                          { return "granted slot" }
