package reapitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// probeSrc reports what of the machine a command sees: it writes to its
// output, for each path, whether it exists.
const probeSrc = `#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	FILE *f = fopen(argv[1], "w");
	if (!f) return 2;
	for (int i = 2; i < argc; i++) fprintf(f, "%s=%d\n", argv[i], access(argv[i], F_OK) == 0);
	return fclose(f) != 0;
}
`

// TestChrootSeesOnlyItsInputRoot: a chrooted command finds its inputs at
// their paths from "/" and nothing of this machine; a program of this
// machine cannot even be started.
func TestChrootSeesOnlyItsInputRoot(t *testing.T) {
	if why := ChrootSupported(); why != "" {
		t.Skip(why)
	}
	const clang = "/usr/lib/llvm-22/bin/clang"
	needTools(t, clang)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "probe.c"), []byte(probeSrc), 0o644)
	probe := filepath.Join(dir, "probe")
	if b, err := exec.Command(clang, "-static", "-fuse-ld=lld", "-o", probe, filepath.Join(dir, "probe.c")).CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, b)
	}
	bin, _ := os.ReadFile(probe)
	_, c := startFake(t, Options{Chroot: true})
	ad := ActionSpec{
		Args:    []string{"../tools/probe", "out/seen", "/etc/passwd", "/proc/self", "/dev/null", "/bin/sh", "/w/in.txt", "in.txt"},
		WorkDir: "w",
		Outputs: []string{"out/seen"},
		Files: map[string]map[string]InputFile{
			"w":     {"in.txt": {Data: []byte("x")}},
			"tools": {"probe": {Data: bin, Exec: true}},
		},
	}.Build(t, c)
	res := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad}).GetResult()
	if res.GetExitCode() != 0 || len(res.OutputFiles) != 1 {
		t.Fatalf("probe: exit %d, outputs %v", res.GetExitCode(), res.OutputFiles)
	}
	d := res.OutputFiles[0].Digest
	seen, err := c.read(t, "blobs/"+d.Hash+"/"+itoa(d.SizeBytes))
	if err != nil {
		t.Fatal(err)
	}
	want := "/etc/passwd=0\n/proc/self=0\n/dev/null=0\n/bin/sh=0\n/w/in.txt=1\nin.txt=1\n"
	if string(seen) != want {
		t.Errorf("the chrooted command saw\n%s\nwant\n%s", seen, want)
	}

	// The machine's own cp is not in the root.
	ad = ActionSpec{Args: []string{"/bin/cp", "in.txt", "out"}, Outputs: []string{"out"},
		Files: map[string]map[string]InputFile{"": {"in.txt": {Data: []byte("x")}}}}.Build(t, c)
	resp := c.Execute(t, &repb.ExecuteRequest{ActionDigest: ad})
	if resp.GetResult().GetExitCode() == 0 && resp.GetStatus().GetCode() == 0 {
		t.Error("a chrooted command ran /bin/cp of this machine")
	}
}
