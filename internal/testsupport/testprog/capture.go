package testprog

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/source/jobfile"
)

// CaptureJobFile links the program (its link line, with clang and
// -fthinlto-distributor) through a distributor that keeps lld's job file
// and every file lld made for it (index shards, archive members copied
// out), then fails so that lld stops. The kept files are put back where lld
// wrote them, so the returned job file's relative paths resolve from p.Dir
// exactly as they did for a real distributor. out is the -o of the link
// (relative to p.Dir); extra are more driver flags.
func (p *Program) CaptureJobFile(ctx context.Context, clang, out string, extra ...string) (string, error) {
	keep, err := os.MkdirTemp("", "testprog-capture-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(keep)
	script := filepath.Join(keep, "capture")
	q := "'" + strings.ReplaceAll(keep, "'", `'\''`) + "'"
	text := `#!/bin/sh
last=""
for a in "$@"; do last=$a; done
d=$(dirname "$last")
mkdir -p ` + q + `/files
cp "$last" ` + q + `/job.json
cp "$d"/*.thinlto.bc ` + q + `/files/ 2>/dev/null
cp "$d"/*\(*\).*.o ` + q + `/files/ 2>/dev/null
echo "$d" > ` + q + `/dir
exit 1
`
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		return "", err
	}
	args := []string{"-flto=thin", "-fuse-ld=lld", "-O2", "-fthinlto-distributor=" + script}
	args = append(args, extra...)
	args = append(args, p.Objects...)
	args = append(args, "-o", out)
	cmd := exec.CommandContext(ctx, clang, args...)
	cmd.Dir = p.Dir
	msg, _ := cmd.CombinedOutput() // fails by design
	d, err := os.ReadFile(filepath.Join(keep, "dir"))
	if err != nil {
		return "", fmt.Errorf("the link did not run the distributor: %s", msg)
	}
	dir := strings.TrimSpace(string(d))
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(p.Dir, dir)
	}
	files, err := os.ReadDir(filepath.Join(keep, "files"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(keep, "files", f.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	job := filepath.Join(dir, strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))+".captured.json")
	data, err := os.ReadFile(filepath.Join(keep, "job.json"))
	if err != nil {
		return "", err
	}
	return job, os.WriteFile(job, data, 0o644)
}

// CaptureActions is CaptureJobFile followed by loading the job file: the
// link's backend actions, with every shard and member copy in place.
func (p *Program) CaptureActions(ctx context.Context, clang, out string, extra ...string) ([]*action.Action, error) {
	job, err := p.CaptureJobFile(ctx, clang, out, extra...)
	if err != nil {
		return nil, err
	}
	jf, err := jobfile.Load(job, p.Dir)
	if err != nil {
		return nil, err
	}
	return jf.Actions, nil
}

// Actions generates the program o describes in a temporary directory of t,
// compiles it with LLVMBin's clang and returns its link's backend actions
// (CaptureActions), skipping t where LLVM is not installed.
func Actions(t testing.TB, o Options) []*action.Action {
	t.Helper()
	bin := LLVMBin()
	NeedLLVM(t, bin, "clang", "ld.lld")
	clang := filepath.Join(bin, "clang")
	p, err := Generate(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Compile(ctx, clang); err != nil {
		t.Fatal(err)
	}
	actions, err := p.CaptureActions(ctx, clang, "prog")
	if err != nil {
		t.Fatal(err)
	}
	return actions
}
