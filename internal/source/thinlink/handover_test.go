package thinlink_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/source/thinlink"
)

// TestLinkWithoutBitcodeRunsUnchanged: Kbuild runs `$(LD) --version` and
// links its vDSO and boot code through the same LD as vmlinux.o, so a link
// none of whose inputs holds bitcode runs as it is: same output, same
// messages, no work directory.
func TestLinkWithoutBitcodeRunsUnchanged(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		for _, flag := range []string{"--version", "-v"} {
			cmd := exec.Command(tc.tool("ld.lld"), flag)
			want, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			res, err := p.link(t, []string{tc.tool("ld.lld"), flag}, func(o *thinlink.Options) { o.Stdout = &stdout })
			if err != nil {
				t.Fatalf("ld.lld %s: %v", flag, err)
			}
			if res.res.Handover == nil || stdout.String() != string(want) {
				t.Errorf("ld.lld %s: left to the linker %v, printed %q, want %q", flag, res.res.Handover != nil, stdout.String(), want)
			}
		}
		// A relocatable link of native objects, and a program.
		run(t, p.dir, nil, tc.tool("ld.lld"), "-r", "obj/asm.o", "obj/nolto.o", "-o", "ref.o")
		lr, err := p.link(t, []string{tc.tool("ld.lld"), "-r", "obj/asm.o", "obj/nolto.o", "-o", "tl.o"}, nil)
		if err != nil || lr.res.Handover == nil {
			t.Fatalf("native -r link: %v (left to the linker %v)\n%s", err, lr.res != nil && lr.res.Handover != nil, lr.stderr)
		}
		a, _ := os.ReadFile(filepath.Join(p.dir, "ref.o"))
		b, _ := os.ReadFile(filepath.Join(p.dir, "tl.o"))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("the native -r link's output differs from ld.lld's own")
		}
		os.WriteFile(filepath.Join(p.dir, "src/hello.c"), []byte("#include <stdio.h>\nint main(void) { puts(\"native\"); return 0; }\n"), 0o644)
		run(t, p.dir, nil, tc.tool("clang"), "-O2", "-c", "src/hello.c", "-o", "obj/hello.o")
		if lr, err := p.link(t, []string{tc.tool("clang"), "-fuse-ld=lld", "obj/hello.o", "-o", "native-app"}, nil); err != nil {
			t.Fatalf("%v\n%s", err, lr.stderr)
		}
		mustEqual(t, "native program", run(t, p.dir, nil, "./native-app"), "native\n")
		// A failing one reports the linker's own message.
		lr, err = p.link(t, []string{tc.tool("ld.lld"), "obj/nolto.o", "-o", "bad"}, nil)
		if err == nil || !strings.Contains(err.Error(), "run unchanged") || !strings.Contains(lr.stderr, "f_core") {
			t.Errorf("failing native link: %v\n%s", err, lr.stderr)
		}
		for _, f := range []string{"tl.o.thindist.d", "native-app.thindist.d", "bad.thindist.d", "bad"} {
			if fileExists(filepath.Join(p.dir, f)) {
				t.Errorf("%s left behind", f)
			}
		}
	})
}

// TestLLDRecognisedByAsking: lld behind a name that does not say lld (a
// wrapper script run directly, or given to the driver with --ld-path) is
// recognised by its --version; a driver that runs another linker is refused.
func TestLLDRecognisedByAsking(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		wrapper := filepath.Join(p.dir, "linker")
		os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+tc.tool("ld.lld")+" \"$@\"\n"), 0o755)
		res := p.mustLink(t, []string{"./linker", "-m", "elf_x86_64", "-r", "-o", "w.o", "--whole-archive", "vmlinux.a"}, nil)
		if len(res.Modules) != 2 {
			t.Errorf("wrapper run directly: compiled %d modules, want 2", len(res.Modules))
		}
		cmd := slices.DeleteFunc(append(p.mainLink("app"), "--ld-path="+wrapper), func(a string) bool { return a == "-fuse-ld=lld" })
		p.mustLink(t, cmd, nil)
		mustEqual(t, "program linked through --ld-path=<wrapper>", run(t, p.dir, nil, "./app"), wantMain)

		gnu := filepath.Join(p.dir, "gnu-ld")
		os.WriteFile(gnu, []byte("#!/bin/sh\necho 'GNU ld (GNU Binutils) 2.40'\n"), 0o755)
		lr, err := p.link(t, []string{tc.tool("clang"), "-flto=thin", "--ld-path=" + gnu, "obj/main.o", "-o", "g"}, nil)
		if err == nil || !strings.Contains(err.Error(), "not lld") {
			t.Errorf("a driver running another linker: %v\n%s", err, lr.stderr)
		}
	})
}

// TestSmallLinkLeftToLLD: a link whose bitcode totals less than
// InProcessBelow runs as given (lld's in-process ThinLTO), with no backend
// of thindist's, and makes what lld makes; at the threshold, or with 0, it
// is distributed. Decide says the same without running anything.
// The sizes counted are the files' and archive members', found here by
// their magic number, not by thindist's reading of the inputs.
func TestSmallLinkLeftToLLD(t *testing.T) {
	eachToolchain(t, func(t *testing.T, tc toolchain, p *project) {
		// Every object the program's link reads, directly or as an
		// archive member (prog_test.go's mainLink and archives).
		var bitcode int64
		modules := 0
		for _, o := range []string{"main", "core", "cls", "w1", "a1", "an", "a2", "an2", "a3", "t1", "t2", "n", "nv",
			"asm", "nolto", "dead", "hot"} {
			data, err := os.ReadFile(filepath.Join(p.dir, "obj", o+".o"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.HasPrefix(data, []byte("BC\xc0\xde")) {
				bitcode += int64(len(data))
				modules++
			}
		}
		run(t, p.dir, nil, p.mainLink("ref")...)
		distributed := 0
		countRuns := func(o *thinlink.Options) {
			inner := o.Run
			o.Run = func(ctx context.Context, actions []*action.Action) error {
				distributed++
				return inner(ctx, actions)
			}
		}
		res := p.mustLink(t, p.mainLink("small"), func(o *thinlink.Options) {
			countRuns(o)
			o.InProcessBelow = bitcode + 1
		})
		h := res.Handover
		if h == nil || !h.InProcess() || distributed != 0 {
			t.Fatalf("under the threshold: handover %+v, %d distributed runs; want it left to lld", h, distributed)
		}
		if h.Modules != modules || h.Bitcode != bitcode || h.Output != "small" || h.Dir != p.dir || !slices.Equal(h.Argv, p.mainLink("small")) {
			t.Errorf("handover %+v; want %d modules, %d bytes, the command as given", h, modules, bitcode)
		}
		ref, _ := os.ReadFile(filepath.Join(p.dir, "ref"))
		small, _ := os.ReadFile(filepath.Join(p.dir, "small"))
		if len(ref) == 0 || !bytes.Equal(ref, small) {
			t.Errorf("the program left to lld differs from lld's own link of the same command")
		}
		if fileExists(filepath.Join(p.dir, "small.thindist.d")) {
			t.Errorf("a link left to lld made a work directory")
		}
		mustEqual(t, "program left to lld", run(t, p.dir, nil, "./small"), wantMain)

		decide := func(below int64) *thinlink.Handover {
			t.Helper()
			h, err := thinlink.Decide(context.Background(), thinlink.Options{Command: p.mainLink("decided"), Dir: p.dir, InProcessBelow: below})
			if err != nil {
				t.Fatal(err)
			}
			if fileExists(filepath.Join(p.dir, "decided")) || fileExists(filepath.Join(p.dir, "decided.thindist.d")) {
				t.Fatalf("Decide wrote the link's files")
			}
			return h
		}
		if d := decide(bitcode + 1); d == nil || d.Bitcode != h.Bitcode || d.Modules != h.Modules || d.Output != "decided" {
			t.Errorf("Decide under the threshold: %+v; want Link's handover %+v", d, h)
		}
		for _, c := range []struct {
			name  string
			below int64
		}{
			{"at the threshold", bitcode},
			{"0", 0},
		} {
			distributed = 0
			res := p.mustLink(t, p.mainLink("dist"), func(o *thinlink.Options) {
				countRuns(o)
				o.InProcessBelow = c.below
			})
			if res.Handover != nil || distributed != 1 {
				t.Errorf("%s: handover %+v, %d distributed runs; want it distributed", c.name, res.Handover, distributed)
			}
			if d := decide(c.below); d != nil {
				t.Errorf("%s: Decide left it to lld: %+v", c.name, d)
			}
		}

		// Exec replaces the process: Link hands it the command and reports
		// an Exec that could not.
		var got thinlink.Handover
		lr, err := p.link(t, p.mainLink("exec"), func(o *thinlink.Options) {
			o.InProcessBelow = 1 << 40
			o.Exec = func(h thinlink.Handover) error { got = h; return errors.New("no such linker") }
		})
		if err == nil || !strings.Contains(err.Error(), "no such linker") || !strings.Contains(err.Error(), "in-process ThinLTO") {
			t.Errorf("an Exec that failed: %v\n%s", err, lr.stderr)
		}
		if !slices.Equal(got.Argv, p.mainLink("exec")) || got.Dir != p.dir || fileExists(filepath.Join(p.dir, "exec")) {
			t.Errorf("Exec was handed %+v; want the command as given, and nothing run", got)
		}
	})
}
