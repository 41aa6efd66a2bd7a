// Package failed keeps what a user needs to run a failed backend again by
// hand. The linker deletes a backend's index shard and its copies of
// archive members once thindist exits, so the command in the error message
// names files that are gone. Keep copies them, with the shard rewritten to
// name the copies, and writes the command as a script that runs on them:
//
//	<cache>/failed/<output>-<hash>/<n>-<module>/
//	  rerun.sh     cd to this directory and run the backend
//	  in/          the module, its index shard, its imports, common inputs
//	  out/         where rerun.sh writes the object
//
// Nothing but the command's arguments and its input files is kept (no
// environment), in directories only their owner can read. Clean removes an
// output's directory after a link of that output succeeds, and any kept
// longer than MaxAge.
package failed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/llvm/bitcode"
	"github.com/thindist/thindist/internal/sys/atomicfile"
)

// MaxAge is how long a failed job's inputs are kept at most.
const MaxAge = 3 * 24 * time.Hour

// Dir is the directory under cacheDir that holds the failed jobs of the
// link writing output (a path relative to dir, or absolute).
func Dir(cacheDir, output, dir string) string {
	if output == "" {
		output = "unnamed"
	}
	abs := output
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	h := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(cacheDir, "failed", safe(filepath.Base(output))+"-"+hex.EncodeToString(h[:6]))
}

// Keep copies a's inputs into a new directory under linkDir (Dir) and
// writes rerun.sh there; it returns the directory. n tells jobs of the same
// link apart. compiler, if not "", is the compiler that ran the command
// that failed in place of a's own (a remote worker's: --remote-compiler):
// rerun.sh runs that one, and says so, and if it is not on the machine
// running the script, says that instead of running another.
func Keep(linkDir string, n int, a *action.Action, compiler string) (string, error) {
	dir := filepath.Join(linkDir, strconv.Itoa(n)+"-"+safe(filepath.Base(a.ID)))
	os.RemoveAll(dir)
	for _, sub := range []string{"in", "out"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return "", err
		}
	}
	os.Chmod(filepath.Dir(linkDir), 0o700)
	os.Chmod(linkDir, 0o700)
	names := make([]string, len(a.Inputs))
	byPath := map[string]string{}
	shard := -1
	for i, in := range a.Inputs {
		names[i] = filepath.Join("in", strconv.Itoa(i)+"-"+safe(filepath.Base(in.Path)))
		byPath[in.Path] = names[i]
		byPath[a.Abs(in.Path)] = names[i]
		if in.Role == action.RoleIndex && shard < 0 {
			shard = i
			continue
		}
		data, err := os.ReadFile(a.Abs(in.Local()))
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", in.Role, in.Path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, names[i]), data, 0o600); err != nil {
			return "", err
		}
	}
	if shard >= 0 {
		// The backend loads the modules the shard names, from the paths
		// it records: they must name the copies.
		in := a.Inputs[shard]
		data, err := os.ReadFile(a.Abs(in.Local()))
		if err != nil {
			return "", fmt.Errorf("index shard %s: %w", in.Path, err)
		}
		if data, err = bitcode.RewriteModulePaths(data, func(m bitcode.Module) string {
			if n, ok := byPath[m.Path]; ok {
				return n
			}
			if n, ok := byPath[a.Abs(m.Path)]; ok {
				return n
			}
			return m.Path
		}); err != nil {
			return "", fmt.Errorf("index shard %s: %w", in.Path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, names[shard]), data, 0o600); err != nil {
			return "", err
		}
	}
	argv := a.Argv(func(i int) string { return names[i] },
		func(i int) string { return filepath.Join("out", strconv.Itoa(i)+".o") })
	id := strings.ReplaceAll(a.ID, "\n", " ")
	script := fmt.Sprintf("#!/bin/sh\n# The backend of %s that failed, on copies of its inputs.\n", id)
	if compiler != "" && compiler != argv[0] {
		argv[0] = compiler
		q := action.ShellQuote([]string{compiler})
		script += fmt.Sprintf("# It failed on a remote worker, with the workers' compiler %s (--remote-compiler),\n"+
			"# not this machine's %s: this runs the workers' compiler.\n", compiler, a.Args[0].Text)
		script += fmt.Sprintf("if ! command -v %s >/dev/null 2>&1; then\n"+
			"  echo %s >&2\n  exit 127\nfi\n", q, action.ShellQuote([]string{
			"rerun.sh: " + compiler + ", the compiler that ran " + id + " on the remote worker, is not on this machine: " +
				"run this script where it is (on a worker, or a machine with the same toolchain)"}))
	}
	script += fmt.Sprintf("cd \"$(dirname \"$0\")\" || exit 1\nexec %s\n", action.ShellQuote(argv))
	if err := atomicfile.WritePrivate(filepath.Join(dir, "rerun.sh"), []byte(script), 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// Clean removes linkDir (Dir: the link of that output succeeded), if it
// is not "", and every failed link's directory older than MaxAge.
func Clean(cacheDir, linkDir string, now time.Time) {
	if linkDir != "" {
		os.RemoveAll(linkDir)
	}
	root := filepath.Join(cacheDir, "failed")
	es, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range es {
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > MaxAge {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// safe makes s a file name: no separators, spaces or parentheses, at most
// 64 bytes.
func safe(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
	if len(s) > 64 {
		s = s[len(s)-64:]
	}
	return s
}
