// Command replayworker stands in for the compiler on a REAL remote execution
// worker (Buildbarn's bb_runner, say) so that a benchmark can measure
// thindist against a real cluster on a machine too small to compile for 64
// worker slots. Like the simulated cluster (reapisim.Simulation, bench's
// -parts cluster), it replays a recording: it finds the recorded result of
// the action it is asked to run, waits the action's recorded CPU time, and
// writes the recorded outputs, stdout and stderr. It does not compile.
//
// It is benchmark tooling, not part of thindist: the worker must run it in
// place of the compiler (at the compiler's path, e.g. with a bind mount in a
// private mount namespace of the runner), through a wrapper that passes the
// directory of the split recording:
//
//	replayworker -split RECORDING.json -dir DIR    # once, on the worker's machine
//	replayworker -dir DIR -- "$0" "$@"             # as the compiler, per action
//
// The action is found by reapisim.ContentKey, computed from what a worker
// sees: the arguments, and the input root on disk (the working directory
// with thindist's nested "w" components, action.Layout, stripped). The
// command's output paths are not visible to the process: they are taken
// from its -o arguments, which for thindist's backend actions are the same.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/thindist/thindist/internal/sys/atomicfile"
	"github.com/thindist/thindist/internal/testsupport/reapisim"
)

func main() {
	start := time.Now()
	split := flag.String("split", "", "split this recording into one file per action under -dir, and exit")
	dir := flag.String("dir", "", "the split recording")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: replayworker -split RECORDING -dir DIR\n       replayworker -dir DIR -- COMPILER ARGS...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *dir == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *split != "" {
		rec, err := reapisim.LoadRecording(*split)
		if err == nil {
			err = rec.Split(*dir)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "replayworker: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "replayworker: %d actions split into %s\n", rec.Len(), *dir)
		return
	}
	code, err := replay(start, *dir, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "replayworker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// replay replays the action whose command is argv, run in the current
// directory, and returns its recorded exit code. It returns no earlier than
// start plus the recorded CPU time.
func replay(start time.Time, dir string, argv []string) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command after --")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	root, workDir := inputRoot(cwd)
	files, err := listFiles(root)
	if err != nil {
		return 0, fmt.Errorf("input root %s: %w", root, err)
	}
	outputs := outputPaths(argv)
	key := reapisim.ContentKey(nil, argv, workDir, files, outputs)
	rec, err := reapisim.LoadRecording(filepath.Join(dir, key+".json"))
	if err != nil {
		return 0, fmt.Errorf("action %s (%d input files, outputs %q) is not recorded: %w", key, len(files), outputs, err)
	}
	ra, ok := rec.Lookup(key)
	if !ok {
		return 0, fmt.Errorf("action %s: the recording's file does not hold it", key)
	}
	for _, f := range ra.Result.GetOutputFiles() {
		b, ok := ra.Blobs[digestKey(f.GetDigest().GetHash(), f.GetDigest().GetSizeBytes())]
		if !ok {
			return 0, fmt.Errorf("action %s: output %s: blob not recorded", key, f.GetPath())
		}
		mode := os.FileMode(0o644)
		if f.GetIsExecutable() {
			mode = 0o755
		}
		p := filepath.FromSlash(f.GetPath())
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := atomicfile.WriteFile(p, b, mode); err != nil {
			return 0, fmt.Errorf("action %s: %w", key, err)
		}
	}
	if len(ra.Result.GetOutputDirectories()) > 0 {
		return 0, fmt.Errorf("action %s: recorded output directories are not supported", key)
	}
	for _, s := range []struct {
		w   io.Writer
		raw []byte
		d   string
	}{
		{os.Stdout, ra.Result.GetStdoutRaw(), digestKey(ra.Result.GetStdoutDigest().GetHash(), ra.Result.GetStdoutDigest().GetSizeBytes())},
		{os.Stderr, ra.Result.GetStderrRaw(), digestKey(ra.Result.GetStderrDigest().GetHash(), ra.Result.GetStderrDigest().GetSizeBytes())},
	} {
		b := s.raw
		if len(b) == 0 {
			b = ra.Blobs[s.d]
		}
		if _, err := s.w.Write(b); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Until(start.Add(ra.CPU)))
	return int(ra.Result.GetExitCode()), nil
}

// outputPaths are the files the command's -o arguments name: thindist's
// backend actions declare exactly these as the command's output paths.
func outputPaths(argv []string) []string {
	var outs []string
	for i, a := range argv {
		if a == "-o" && i+1 < len(argv) {
			outs = append(outs, argv[i+1])
		}
	}
	return outs
}

// inputRoot splits the working directory cwd into the input root and the
// working directory inside it: thindist nests the working directory in
// components named "w" (action.Layout).
func inputRoot(cwd string) (root, workDir string) {
	root = filepath.Clean(cwd)
	for filepath.Base(root) == "w" {
		root = filepath.Dir(root)
		workDir = path.Join("w", workDir)
	}
	return root, workDir
}

// listFiles maps every regular file below root, by its root-relative
// slash-separated path, to its digest.
func listFiles(root string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = digestKey(hex.EncodeToString(h.Sum(nil)), n)
		return nil
	})
	return files, err
}

// digestKey spells a digest as reapisim's recordings do.
func digestKey(hash string, size int64) string { return fmt.Sprintf("%s/%d", hash, size) }
