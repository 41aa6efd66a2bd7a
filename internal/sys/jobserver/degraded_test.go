package jobserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// brokenJobserver fails every Acquire as a jobserver at EOF does.
type brokenJobserver struct{ calls int }

func (b *brokenJobserver) Acquire(context.Context) (func(), error) {
	b.calls++
	return nil, fmt.Errorf("%w (reading a token: EOF)", ErrBroken)
}

// TestTolerant: a jobserver that stops working is reported once, and
// every Acquire after it succeeds; another error is passed on.
func TestTolerant(t *testing.T) {
	var said []error
	js := &brokenJobserver{}
	tol := Tolerant(js, func(err error) { said = append(said, err) })
	for i := 0; i < 3; i++ {
		rel, err := tol.Acquire(context.Background())
		if err != nil || rel == nil {
			t.Fatalf("Acquire %d: %v, release %v; want a slot", i, err, rel != nil)
		}
		rel()
	}
	if len(said) != 1 || !errors.Is(said[0], ErrBroken) || js.calls != 3 {
		t.Errorf("reported %v after %d calls; want ErrBroken once, every call asking the jobserver", said, js.calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Tolerant(cancelled{}, func(error) { t.Error("a cancelled Acquire reported as broken") }).Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Acquire: %v; want context.Canceled", err)
	}
}

type cancelled struct{}

func (cancelled) Acquire(ctx context.Context) (func(), error) { return nil, ctx.Err() }

// TestOncePerBuild: a jobserver not available is said with the hint
// (by the first process of its build), not at all when
// silenced; any other Inherited is left alone.
func TestOncePerBuild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	na := Inherited{Err: &NotAvailableError{Auth: "999,998", Reason: "999 is not open"}}
	if got := na.OncePerBuild(dir, true, "HINT").Err; got != nil {
		t.Errorf("silenced: %v; want none", got)
	}
	// dir is new: this process is the first of its build to ask.
	got := na.OncePerBuild(dir, false, "--quiet silences it").Err
	var e *NotAvailableError
	if got == nil || !errors.As(got, &e) || !strings.HasSuffix(got.Error(), "999 is not open (said once per make; --quiet silences it)") {
		t.Errorf("first in its build: %v; want the error with the hint", got)
	}
	other := Inherited{Err: errors.New("other")}
	if got := other.OncePerBuild(dir, true, "HINT"); got.Err != other.Err {
		t.Errorf("another error became %v", got.Err)
	}
}
