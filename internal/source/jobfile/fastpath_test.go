package jobfile

import (
	"strings"
	"testing"
)

// The fast paths of decode and stringsAt (json.Unmarshal of a whole string
// array) must accept exactly what the element-by-element path accepts, and
// leave the error messages that name the field to it.
func TestFastPathKeepsFieldErrors(t *testing.T) {
	const ok = `{"common":{"linker_output":"a.out","args":["/cc","-c","-O2"],"inputs":[]},
	  "jobs":[{"args":["t1.o","-fthinlto-index=t1.bc","-o","t1.n.o"],"inputs":["t1.o","t1.bc","t2.o"],"outputs":["t1.n.o"],"extra":1},
	          {"args":["t2.o","-fthinlto-index=t2.bc","-o","t2.n.o"],"inputs":["t2.o","t2.bc"],"outputs":["t2.n.o"]}]}`
	f, err := Parse([]byte(ok), "/w")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Actions) != 2 || f.Actions[0].ID != "t1.o" || len(f.Actions[0].Inputs) != 3 || f.Actions[1].Outputs[0].Path != "t2.n.o" {
		t.Fatalf("parsed %+v", f.Actions)
	}
	if got := strings.Join(f.Actions[0].Command(), " "); got != "/cc -c -O2 t1.o -fthinlto-index=t1.bc -o t1.n.o" {
		t.Fatalf("command %q", got)
	}

	for _, tc := range []struct{ file, want string }{
		{strings.Replace(ok, `"t2.o","t2.bc"`, `"t2.o",7`, 1), "jobs[1].inputs[1]"},
		{strings.Replace(ok, `"args":["/cc","-c","-O2"]`, `"args":["/cc",5,"-O2"]`, 1), "common.args[1]"},
		{strings.Replace(ok, `"outputs":["t1.n.o"]`, `"outputs":"t1.n.o"`, 1), "jobs[0].outputs"},
		{strings.Replace(ok, `"outputs":["t2.n.o"]`, `"outputs":null`, 1), "jobs[1].outputs"},
		{strings.Replace(ok, `{"args":["t2.o"`, `{"argz":["t2.o"`, 1), "jobs[1].args"},
		{strings.Replace(ok, `"jobs":[`, `"jobs":[3,`, 1), "jobs[0]"},
	} {
		_, err := Parse([]byte(tc.file), "/w")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}

	f, err = Parse([]byte(`{"common":{"args":["/cc"]},"jobs":[]}`), "/w")
	if err != nil || f.Actions == nil || len(f.Actions) != 0 {
		t.Fatalf("empty jobs: %v %#v", err, f)
	}
}
