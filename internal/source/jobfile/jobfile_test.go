package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/thindist/thindist/internal/action"
)

const lldFile = `{
 "common": {"linker_output": "a.out",
  "args": ["/usr/bin/clang", "-c", "-O2", "-fprofile-sample-use=my.prof", "-Wno-unused-command-line-argument"],
  "inputs": ["my.prof"], "future_key": {"x": [1, 2]}},
 "jobs": [
  {"args": ["t1.o", "-fthinlto-index=t1.1.99.native.o.thinlto.bc", "-o", "t1.1.99.native.o"],
   "inputs": ["t1.o", "t1.1.99.native.o.thinlto.bc", "sub/../t2.o", "/abs/lib.a(m.o at 88).3.2F3A.o"],
   "outputs": ["t1.1.99.native.o"], "unknown": true},
  {"args": ["sub/../t2.o", "-fthinlto-index=t2.2.99.native.o.thinlto.bc", "-o", "t2.2.99.native.o", "-fproc-stat-report=t2.stats.txt"],
   "inputs": ["sub/../t2.o", "t2.2.99.native.o.thinlto.bc"],
   "outputs": ["t2.2.99.native.o", "t2.stats.txt"]}
 ]}`

func TestLLD(t *testing.T) {
	f, err := Parse([]byte(lldFile), "/work")
	if err != nil {
		t.Fatal(err)
	}
	if f.Schema != "lld" || f.LinkerOutput != "a.out" || len(f.Actions) != 2 {
		t.Fatalf("got %+v", f)
	}
	a := f.Actions[0]
	if a.ID != "t1.o" || a.Dir != "/work" {
		t.Errorf("ID %q Dir %q", a.ID, a.Dir)
	}
	wantRoles := []action.Role{action.RoleModule, action.RoleIndex, action.RoleImport, action.RoleImport, action.RoleCommon}
	var roles []action.Role
	for _, in := range a.Inputs {
		roles = append(roles, in.Role)
	}
	if !reflect.DeepEqual(roles, wantRoles) {
		t.Errorf("roles %v, want %v", roles, wantRoles)
	}
	want := []string{"/usr/bin/clang", "-c", "-O2", "-fprofile-sample-use=my.prof", "-Wno-unused-command-line-argument",
		"t1.o", "-fthinlto-index=t1.1.99.native.o.thinlto.bc", "-o", "t1.1.99.native.o"}
	if got := a.Command(); !reflect.DeepEqual(got, want) {
		t.Errorf("Command() = %q, want %q", got, want)
	}
	// The module, the shard, the profile and the output are references, so
	// an executor can move them.
	argv := a.Argv(func(i int) string { return "IN" + string(rune('0'+i)) }, func(i int) string { return "OUT" })
	wantArgv := []string{"/usr/bin/clang", "-c", "-O2", "-fprofile-sample-use=IN4", "-Wno-unused-command-line-argument",
		"IN0", "-fthinlto-index=IN1", "-o", "OUT"}
	if !reflect.DeepEqual(argv, wantArgv) {
		t.Errorf("Argv = %q, want %q", argv, wantArgv)
	}
	if got := f.Actions[1]; got.ID != "sub/../t2.o" || len(got.Outputs) != 2 || got.Args[len(got.Args)-1].Kind != action.OutputRef {
		t.Errorf("job 1: %+v", got)
	}
}

func TestV0(t *testing.T) {
	const v0 = `{"version": {"major": 0, "minor": 1},
	 "common": {"linker_output": "prog", "codegen-tool": "/usr/bin/clang",
	  "args": ["-c", "-x", "ir", "-fprofile-sample-use=p.prof"],
	  "inputs": ["p.prof"],
	  "modules": ["main.o", ["lib.a(m.o at 88)", "m.1234.o"]]},
	 "jobs": [
	  {"inputs": [0, "main.o.thinlto.bc", 1], "outputs": ["main.native.o"],
	   "args": [["", "inputs", 0], ["-fthinlto-index=", "inputs", 1], "-o", ["", "outputs", 0]]},
	  {"inputs": [1, "lib.a(m.o at 88).thinlto.bc"], "outputs": ["m.native.o"],
	   "args": [["", "inputs", 0], ["-fthinlto-index=", "inputs", 1], "-o", ["", "outputs", 0]]}]}`
	f, err := Parse([]byte(v0), "/w")
	if err != nil {
		t.Fatal(err)
	}
	if f.Schema != "rfc-v0" || len(f.Actions) != 2 {
		t.Fatalf("%+v", f)
	}
	a := f.Actions[1]
	if a.ID != "lib.a(m.o at 88)" || a.Inputs[0].Source != "m.1234.o" || !a.Mapped() {
		t.Errorf("member job: %+v", a)
	}
	want := []string{"/usr/bin/clang", "-c", "-x", "ir", "-fprofile-sample-use=p.prof",
		"lib.a(m.o at 88)", "-fthinlto-index=lib.a(m.o at 88).thinlto.bc", "-o", "m.native.o"}
	if got := a.Command(); !reflect.DeepEqual(got, want) {
		t.Errorf("Command() = %q, want %q", got, want)
	}
	m := f.Actions[0]
	if m.Inputs[2].Path != "lib.a(m.o at 88)" || m.Inputs[2].Source != "m.1234.o" || m.Inputs[2].Role != action.RoleImport {
		t.Errorf("import of main: %+v", m.Inputs[2])
	}
	if m.Inputs[0].Source != "" {
		t.Errorf("main.o is mapped to %q", m.Inputs[0].Source)
	}
}

// Every kind of error is an *Error naming the job (or none, for the common
// part) and the field.
func TestErrors(t *testing.T) {
	const c = `"common": {"args": ["clang"]}`
	const okJob = `{"args": ["a.o", "-fthinlto-index=a.bc", "-o", "a.n.o"], "inputs": ["a.o", "a.bc"], "outputs": ["a.n.o"]}`
	const v0c = `"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": "clang", "args": [], "modules": ["a.o"]}`
	for _, tc := range []struct {
		name, in string
		job      int
		field    string
		msg      string
	}{
		{"empty", ``, -1, "(top level)", "malformed JSON"},
		{"truncated", `{"common": {`, -1, "(top level)", "malformed JSON"},
		{"trailing data", `{"common": {"args": ["c"]}, "jobs": []} {"x": 1}`, -1, "(top level)", "after the value"},
		{"not an object", `[1]`, -1, "", "an object"},
		{"no common", `{"jobs": []}`, -1, "common", "missing"},
		{"common wrong type", `{"common": [], "jobs": []}`, -1, "common", "an object"},
		{"no args", `{"common": {}, "jobs": []}`, -1, "common.args", "missing"},
		{"args not array", `{"common": {"args": "clang"}, "jobs": []}`, -1, "common.args", "an array"},
		{"args element", `{"common": {"args": ["clang", 3]}, "jobs": []}`, -1, "common.args[1]", "a string"},
		{"args empty", `{"common": {"args": []}, "jobs": []}`, -1, "common.args", "empty"},
		{"empty compiler", `{"common": {"args": [""]}, "jobs": []}`, -1, "common.args[0]", "--thinlto-remote-compiler"},
		{"blank compiler", `{"common": {"args": ["  "]}, "jobs": []}`, -1, "common.args[0]", "compiler is empty"},
		{"inputs wrong type", `{"common": {"args": ["clang"], "inputs": {}}, "jobs": []}`, -1, "common.inputs", "an array"},
		{"linker_output type", `{"common": {"args": ["clang"], "linker_output": 1}, "jobs": []}`, -1, "common.linker_output", "a string"},
		{"no jobs", `{` + c + `}`, -1, "jobs", "missing"},
		{"jobs not array", `{` + c + `, "jobs": {}}`, -1, "jobs", "an array"},
		{"job not object", `{` + c + `, "jobs": [` + okJob + `, 7]}`, 1, "jobs[1]", "an object"},
		{"job inputs missing", `{` + c + `, "jobs": [{"args": [], "outputs": ["x"]}]}`, 0, "jobs[0].inputs", "missing"},
		{"job inputs type", `{` + c + `, "jobs": [{"args": [], "inputs": "a.o", "outputs": ["x"]}]}`, 0, "jobs[0].inputs", "an array"},
		{"job args missing", `{` + c + `, "jobs": [{"inputs": ["a.o", "a.bc"], "outputs": ["x"]}]}`, 0, "jobs[0].args", "missing"},
		{"job outputs missing", `{` + c + `, "jobs": [{"args": [], "inputs": ["a.o", "a.bc"]}]}`, 0, "jobs[0].outputs", "missing"},
		{"no module", `{` + c + `, "jobs": [{"args": ["-o", "x"], "inputs": [], "outputs": ["x"]}]}`, 0, "jobs[0].inputs", "inputs[0]"},
		{"no shard", `{` + c + `, "jobs": [{"args": ["a.o", "-o", "x"], "inputs": ["a.o"], "outputs": ["x"]}]}`, 0, "jobs[0].inputs", "index shard"},
		{"no output", `{` + c + `, "jobs": [{"args": ["a.o"], "inputs": ["a.o", "a.bc"], "outputs": []}]}`, 0, "jobs[0].outputs", "outputs[0]"},
		{"empty input", `{` + c + `, "jobs": [{"args": ["-o", "x"], "inputs": ["a.o", ""], "outputs": ["x"]}]}`, 0, "jobs[0].inputs[1]", "empty path"},
		{"empty output", `{` + c + `, "jobs": [{"args": ["a.o"], "inputs": ["a.o", "a.bc"], "outputs": [""]}]}`, 0, "jobs[0].outputs[0]", "empty path"},
		{"undirected output", `{` + c + `, "jobs": [` + okJob + `, {"args": ["b.o"], "inputs": ["b.o", "b.bc"], "outputs": ["b.n.o"]}]}`, 1, "jobs[1].outputs[0]", "not named by any argument"},
		{"shared output", `{` + c + `, "jobs": [` + okJob + `, {"args": ["b.o", "-fthinlto-index=b.bc", "-o", "sub/../a.n.o"], "inputs": ["b.o", "b.bc"], "outputs": ["sub/../a.n.o"]}]}`, 1, "jobs[1].outputs[0]", "also an output of job 0"},
		{"output twice", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x", "./x"], "args": [["-o", "outputs", 0], ["-s=", "outputs", 1]]}]}`, 0, "jobs[0].outputs[1]", "listed twice"},
		{"output is input", `{` + c + `, "jobs": [{"args": ["a.o", "-fthinlto-index=a.bc", "-o", "a.bc"], "inputs": ["a.o", "a.bc"], "outputs": ["a.bc"]}]}`, 0, "jobs[0].outputs[0]", "also an input"},
		{"output is input, spelt otherwise", `{` + c + `, "jobs": [{"args": ["a.o", "-fthinlto-index=a.bc", "-o", "/w/d/../a.o"], "inputs": ["a.o", "a.bc"], "outputs": ["/w/d/../a.o"]}]}`, 0, "jobs[0].outputs[0]", "also an input"},
		{"output is input, named by ..", `{` + c + `, "jobs": [{"args": ["d/e/..", "-fthinlto-index=a.bc", "-o", "d"], "inputs": ["d/e/..", "a.bc"], "outputs": ["d"]}]}`, 0, "jobs[0].outputs[0]", "also an input"},
		{"output is input, named by .", `{` + c + `, "jobs": [{"args": ["d/.", "-fthinlto-index=a.bc", "-o", "d"], "inputs": ["d/.", "a.bc"], "outputs": ["d"]}]}`, 0, "jobs[0].outputs[0]", "also an input"},
		{"version type", `{"version": "0.1", "common": {"codegen-tool": "clang", "args": []}, "jobs": []}`, -1, "version", "an object"},
		{"version minor missing", `{"version": {"major": 0}, "common": {"codegen-tool": "clang", "args": []}, "jobs": []}`, -1, "version.minor", "missing"},
		{"version unsupported", `{"version": {"major": 2, "minor": 0}, "common": {"codegen-tool": "clang", "args": []}, "jobs": []}`, -1, "version", "not supported"},
		{"version without tool", `{"version": {"major": 0, "minor": 1}, "common": {"args": []}, "jobs": []}`, -1, "common.codegen-tool", "missing"},
		{"tool without version", `{"common": {"codegen-tool": "clang", "args": []}, "jobs": []}`, -1, "version", "missing"},
		{"empty tool", `{"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": "", "args": []}, "jobs": []}`, -1, "common.codegen-tool", "--thinlto-remote-compiler"},
		{"template arity", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "inputs"]]}]}`, 0, "jobs[0].args[0]", "3 entries"},
		{"template kind", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "files", 0]]}]}`, 0, "jobs[0].args[0][1]", `"inputs" or "outputs"`},
		{"template negative", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "inputs", -1]]}]}`, 0, "jobs[0].args[0][2]", "negative"},
		{"template range", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "inputs", 2]]}]}`, 0, "jobs[0].args[0]", "inputs[2]"},
		{"output template range", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "outputs", 1]]}]}`, 0, "jobs[0].args[0]", "outputs[1]"},
		{"common template range", `{"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": "clang", "args": [["-f", "inputs", 9]], "modules": ["a.o"]}, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [["", "outputs", 0]]}]}`, 0, "common.args[0]", "inputs[9]"},
		{"template element", `{` + v0c + `, "jobs": [{"inputs": [0, "a.bc"], "outputs": ["x"], "args": [5]}]}`, 0, "jobs[0].args[0]", "template"},
		{"module ref range", `{` + v0c + `, "jobs": [{"inputs": [3, "a.bc"], "outputs": ["x"], "args": [["", "outputs", 0]]}]}`, 0, "jobs[0].inputs[0]", "common.modules has 1"},
		{"module ref type", `{` + v0c + `, "jobs": [{"inputs": [true, "a.bc"], "outputs": ["x"], "args": [["", "outputs", 0]]}]}`, 0, "jobs[0].inputs[0]", "integer index"},
		{"module entry", `{"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": "clang", "args": [], "modules": [["a", "b", "c"]]}, "jobs": []}`, -1, "common.modules[0]", "pair"},
		{"module empty", `{"version": {"major": 0, "minor": 1}, "common": {"codegen-tool": "clang", "args": [], "modules": [["", "b"]]}, "jobs": []}`, -1, "common.modules[0]", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.in), "/w")
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("%T %v is not an *Error", err, err)
			}
			if je.Job != tc.job {
				t.Errorf("Job = %d, want %d (%v)", je.Job, tc.job, err)
			}
			if tc.field != "" && je.Field != tc.field {
				t.Errorf("Field = %q, want %q (%v)", je.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%q does not say %q", err, tc.msg)
			}
			if tc.job >= 0 && !strings.Contains(err.Error(), "job ") {
				t.Errorf("%q does not name the job", err)
			}
		})
	}
}

func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.json")
	if err := os.WriteFile(path, []byte(`{"common": {"args": [""]}, "jobs": []}`), 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, "/w")
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load error %v does not start with the file name", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.json"), "/w"); err == nil {
		t.Error("a missing job file loaded")
	}
}

// TestInterned: a module's path in the jobs that import it, and what the
// arguments keep, are one string each, not a copy per job (the actions live
// for the whole run).
func TestInterned(t *testing.T) {
	f, err := Parse([]byte(lldFile), "/work")
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.Actions[0], f.Actions[1]
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are separate copies", what, x, y)
		}
	}
	same("t2.o imported and compiled", a.Inputs[2].Path, b.Inputs[0].Path)
	same("the shard argument's prefix", a.Args[6].Text, b.Args[6].Text)
	same("the -o literal", a.Args[7].Text, b.Args[7].Text)
	if a.Args[5].Kind != action.InputRef || a.Args[5].Text != "" {
		t.Fatalf("t1.o's argument: %+v", a.Args[5])
	}
}
