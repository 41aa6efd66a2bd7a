package rundir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFirstInBuild: the first ask of a kind in a build is first, the
// next ones are not; another build or another kind is first again; a
// marker of a build whose make is gone is removed.
func TestFirstInBuild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	_, start, _, ok := procStat(os.Getpid())
	if !ok {
		t.Skip("no /proc")
	}
	self := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(start, 10)
	if !firstIn(dir, "warn", self) || firstIn(dir, "warn", self) || firstIn(dir, "warn", self) {
		t.Error("the first ask in a build is not the only first one")
	}
	if !firstIn(dir, "other", self) {
		t.Error("another kind in the same build is not first")
	}
	// A build whose make has ended: its marker goes when another is made.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	ended := strconv.Itoa(gone.Process.Pid) + "-1"
	if !firstIn(dir, "warn", ended) {
		t.Error("another build is not first")
	}
	if !firstIn(dir, "x", self) {
		t.Error("kind x is not first")
	}
	des, _ := os.ReadDir(dir)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if strings.Contains(strings.Join(names, " "), ended) || len(names) != 3 {
		t.Errorf("markers %q: want this build's three, not the ended build's", names)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("marker directory %v, %v; want mode 0700", fi, err)
	}
}

// TestOutermostMake: under make and a recursive sub-make, the build is the
// outermost make's process; outside make there is none.
func TestOutermostMake(t *testing.T) {
	if os.Getenv("THINDIST_TEST_HELPER") != "" {
		build, _ := outermostMake(os.Getpid())
		os.WriteFile(os.Getenv("THINDIST_TEST_HELPER"), []byte(build), 0o644)
		return
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	if os.Getenv("MAKELEVEL") == "" {
		if b, ok := outermostMake(os.Getpid()); ok {
			t.Errorf("outside make, found the build %s", b)
		}
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(dir, "got")
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("all:\n\t+$(MAKE) -s -f sub.mk\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub.mk"), []byte("all:\n\t"+exe+" -test.run=TestOutermostMake\n"), 0o644)
	cmd := exec.Command("make", "-s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "THINDIST_TEST_HELPER="+got, "MAKEFLAGS=", "MAKELEVEL=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The start time is the fork's: readable before make has begun.
	_, start, _, _ := procStat(cmd.Process.Pid)
	want := strconv.Itoa(cmd.Process.Pid) + "-" + strconv.FormatUint(start, 10)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != want {
		t.Errorf("the build under make is %q (%v), want the outer make's %s", b, err, want)
	}
}
