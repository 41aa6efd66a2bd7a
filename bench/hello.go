package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/testsupport/realproj"
)

// setupHello builds the project "hello": the README's demo
// (examples/hello), four small C modules, three of them in an archive,
// compiled as its Makefile does. Its check is the output of the same
// sources compiled without LTO.
func setupHello(ctx context.Context, t *tools, dir string) (*project, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("finding the module's root: %v", err)
	}
	src := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "examples", "hello")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	mods := []string{"main", "shapes", "checksum", "greeting"}
	var sources []string
	for _, m := range mods {
		sources = append(sources, filepath.Join(src, m+".c"))
		if err := run(t.tc.Clang, "-O2", "-flto=thin", "-c", filepath.Join(src, m+".c"), "-o", m+".o"); err != nil {
			return nil, err
		}
	}
	os.Remove(filepath.Join(dir, "libutil.a"))
	if err := run(t.tc.AR, "rcs", "libutil.a", "shapes.o", "checksum.o", "greeting.o"); err != nil {
		return nil, err
	}
	if err := run(t.tc.Clang, append([]string{"-O2", "-o", "hello-nolto"}, sources...)...); err != nil {
		return nil, err
	}
	want, err := exec.CommandContext(ctx, filepath.Join(dir, "hello-nolto")).Output()
	if err != nil {
		return nil, fmt.Errorf("running the demo built without LTO: %v", err)
	}
	b := &realproj.Build{Name: "hello", Dir: dir, Objects: []string{"main.o"}, Archives: []string{"libutil.a"},
		CFlags: []string{"-O2"}, Modules: len(mods)}
	return &project{name: "the README's demo (4 modules)", build: b, check: func(ctx context.Context, exe string) error {
		return expectOutput(ctx, dir, string(want), exe)
	}}, nil
}
