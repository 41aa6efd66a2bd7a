package thinlink_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thindist/thindist/internal/thinlink"
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
			if !res.res.Unchanged || stdout.String() != string(want) {
				t.Errorf("ld.lld %s: unchanged %v, printed %q, want %q", flag, res.res.Unchanged, stdout.String(), want)
			}
		}
		// A relocatable link of native objects, and a program.
		run(t, p.dir, nil, tc.tool("ld.lld"), "-r", "obj/asm.o", "obj/nolto.o", "-o", "ref.o")
		lr, err := p.link(t, []string{tc.tool("ld.lld"), "-r", "obj/asm.o", "obj/nolto.o", "-o", "tl.o"}, nil)
		if err != nil || !lr.res.Unchanged {
			t.Fatalf("native -r link: %v (unchanged %v)\n%s", err, lr.res != nil && lr.res.Unchanged, lr.stderr)
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
