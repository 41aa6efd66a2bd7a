package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/config"
)

func failingActions(t *testing.T) []*action.Action {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.o"), []byte("BC"), 0o644)
	os.WriteFile(filepath.Join(dir, "m.bc"), []byte("BC"), 0o644)
	return []*action.Action{
		{ID: "m.o", Dir: dir,
			Args:    []action.Arg{action.Lit("/bin/sh"), action.Lit("-c"), action.Lit("echo boom >&2; exit 1"), action.Out("", 0), action.In("", 0), action.In("", 1)},
			Inputs:  []action.Input{{Path: "m.o", Role: action.RoleModule}, {Path: "m.bc", Role: action.RoleIndex}},
			Outputs: []action.Output{{Path: "m.native.o"}}},
		{ID: "gone.o", Dir: dir,
			Args:    []action.Arg{action.Lit("/bin/true"), action.In("", 0), action.Out("", 0)},
			Inputs:  []action.Input{{Path: "gone.o", Role: action.RoleModule}},
			Outputs: []action.Output{{Path: "gone.native.o"}}},
	}
}

func TestErrorsGoToStderrWithoutDiag(t *testing.T) {
	var stderr bytes.Buffer
	cfg := &config.Config{Jobs: 1, Progress: "never", NoCache: true}
	err := RunWith(context.Background(), cfg, Env{Stderr: &stderr, Getenv: func(string) string { return "" }}, failingActions(t)[:1], Options{})
	if err == nil || !strings.Contains(stderr.String(), "thindist: error: backend compilation of m.o failed") {
		t.Errorf("err %v, stderr:\n%s", err, stderr.String())
	}
}

func TestErrorsGoToDiag(t *testing.T) {
	var stderr bytes.Buffer
	var got []Diagnostic
	cfg := &config.Config{Jobs: 1, Progress: "never", Quiet: true, NoCache: true}
	env := Env{Stderr: &stderr, Getenv: func(string) string { return "" }, Diag: func(d Diagnostic) { got = append(got, d) }}

	if err := RunWith(context.Background(), cfg, env, failingActions(t)[:1], Options{}); err == nil {
		t.Fatal("no error")
	}
	if len(got) != 1 || got[0].Warning || got[0].Module != "m.o" || !strings.Contains(got[0].Msg, "backend compilation of m.o failed") {
		t.Errorf("diagnostics %+v", got)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr, with Diag and --quiet: %q", stderr.String())
	}

	got = nil
	if err := RunWith(context.Background(), cfg, env, failingActions(t), Options{}); err == nil {
		t.Fatal("no error")
	}
	if len(got) != 1 || got[0].Module != "gone.o" || !strings.HasPrefix(got[0].Msg, `gone.o: module "gone.o" does not exist`) {
		t.Errorf("missing input: diagnostics %+v", got)
	}
}
