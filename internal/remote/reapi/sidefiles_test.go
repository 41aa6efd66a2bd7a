package reapi

import (
	"testing"

	"github.com/thindist/thindist/internal/action"
)

// TestSideFiles: the options that make clang write files beside the object
// are found; those that only print, or change the object, are not.
func TestSideFiles(t *testing.T) {
	for _, c := range []struct {
		opt, want string
	}{
		{"--save-temps", "--save-temps"}, {"-save-temps=obj", "-save-temps=obj"},
		{"-fsave-optimization-record", "-fsave-optimization-record"},
		{"-foptimization-record-file=r.yaml", "-foptimization-record-file=r.yaml"},
		{"-ftime-trace", "-ftime-trace"}, {"-ftime-trace=t.json", "-ftime-trace=t.json"},
		{"-gsplit-dwarf", "-gsplit-dwarf"}, {"-MD", "-MD"}, {"-MFdeps.d", "-MFdeps.d"},
		{"-fstack-usage", "-fstack-usage"}, {"-save-stats", "-save-stats"},
		{"-Rpass=inline", ""}, {"-ftime-report", ""}, {"-O3", ""}, {"-g", ""}, {"-mllvm", ""},
	} {
		a := &action.Action{Args: []action.Arg{action.Lit("clang"), action.Lit("-c"), action.Lit(c.opt), action.In("", 0)},
			Inputs: []action.Input{{Path: "m.o", Role: action.RoleModule}}}
		if got := SideFiles(a); got != c.want {
			t.Errorf("SideFiles(%s) = %q, want %q", c.opt, got, c.want)
		}
	}
}
