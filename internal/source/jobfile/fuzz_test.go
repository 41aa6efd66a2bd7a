package jobfile

import (
	"errors"
	"testing"
)

// FuzzParse: Parse never panics, every error is an *Error, and every file it
// accepts yields actions that pass Action.Validate and render a command;
// where the one-pass path (scan.go) takes a file, the general path gives
// the same result.
// The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(lldFile))
	f.Add([]byte(`{"common": {"args": ["clang"]}, "jobs": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data) // the one-pass path agrees with the general one
		jf, err := Parse(data, "/w")
		if err != nil {
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			_ = err.Error()
			return
		}
		for i, a := range jf.Actions {
			if err := a.Validate(); err != nil {
				t.Fatalf("accepted job %d fails Validate: %v", i, err)
			}
			if a.ID == "" || len(a.Inputs) < 2 || a.Inputs[0].Path != a.ID {
				t.Fatalf("accepted job %d without a module: %+v", i, a)
			}
			for k, o := range a.Outputs {
				if o.Path == "" {
					t.Fatalf("job %d: output %d is empty", i, k)
				}
			}
			for k, in := range a.Inputs {
				if in.Path == "" || in.Local() == "" {
					t.Fatalf("job %d: input %d is empty", i, k)
				}
			}
			if argv := a.Command(); len(argv) != len(a.Args) || argv[0] == "" {
				t.Fatalf("job %d renders %q", i, argv)
			}
			a.Layout() // must not panic either
		}
	})
}
