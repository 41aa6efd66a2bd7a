package jobserver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/thindist/thindist/internal/sys/rundir"
)

// Acquirer hands out job slots: a Client, or what stands for one.
type Acquirer interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Tolerant returns js as an Acquirer that a jobserver stopping mid-run
// (ErrBroken: make's pipe gone) does not fail: broken is called once,
// with the error, and every Acquire from then on succeeds at once, so
// that the caller's own bound (--jobs) alone holds the run rather than a
// module failing for it. Other errors (a cancelled ctx) are returned as
// they are.
func Tolerant(js Acquirer, broken func(error)) Acquirer {
	return &tolerant{js: js, broken: broken}
}

type tolerant struct {
	js     Acquirer
	broken func(error)
	once   sync.Once
}

func (t *tolerant) Acquire(ctx context.Context) (func(), error) {
	release, err := t.js.Acquire(ctx)
	if errors.Is(err, ErrBroken) {
		t.once.Do(func() { t.broken(err) })
		return func() {}, nil
	}
	return release, err
}

// OncePerBuild returns in with its Err, when that is a
// *NotAvailableError, kept for the first process of a make build to meet
// it (rundir.FirstInBuild, its marker in dir) and there extended with
// "(said once per make; HINT)": every link of a CMake build, and every
// plugin link under such a recipe, would print it, and the user can act
// on it once at most. With silenced, or for the other processes of the
// build, Err is nil. Any other in is returned as it is.
func (in Inherited) OncePerBuild(dir string, silenced bool, hint string) Inherited {
	var na *NotAvailableError
	if !errors.As(in.Err, &na) {
		return in
	}
	if silenced || !rundir.FirstInBuild(dir, "jobserver-warning") {
		in.Err = nil
		return in
	}
	in.Err = fmt.Errorf("%w (said once per make; %s)", na, hint)
	return in
}
