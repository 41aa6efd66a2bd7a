package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thindist/thindist/internal/observe/record"
	"github.com/thindist/thindist/internal/pipeline"
	"github.com/thindist/thindist/internal/sys/jobserver"
	"github.com/thindist/thindist/internal/testsupport/testprog"
)

// TestLinkSubcommand runs `thindist link` as the command line does.
func TestLinkSubcommand(t *testing.T) {
	clang := thinObjects(t)
	if code := Main(context.Background(), []string{"link", "-j", "2", "--progress=never", "--keep-native-objects", "kept",
		"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app"}, pipeline.StdEnv(jobserver.Inherited{})); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if err := exec.Command("./app").Run(); err != nil {
		t.Fatalf("the linked program: %v", err)
	}
	for _, f := range []string{"kept/a.o", "kept/b.o"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("--keep-native-objects: %v", err)
		}
	}
	if code := Main(context.Background(), []string{"link", "--progress=never"}, pipeline.StdEnv(jobserver.Inherited{})); code != 2 {
		t.Errorf("no link command: exit status %d, want 2", code)
	}
	if code := Main(context.Background(), []string{"link", "--progress=never", "--", clang, "-fuse-ld=lld", "missing.o", "-o", "x"}, pipeline.StdEnv(jobserver.Inherited{})); code != 1 {
		t.Errorf("bad link: exit status %d, want 1", code)
	}
}

// distributeAll is the environment of a test whose links are to be
// distributed however small (its programs are), with a home of its own.
func distributeAll(t *testing.T) map[string]string {
	return map[string]string{"HOME": t.TempDir(), "THINDIST_IN_PROCESS_BELOW": "0"}
}

// thinObjects compiles a.o and b.o, a two-module ThinLTO program, in a
// fresh directory, makes it the working directory for the test, and
// returns the clang to link them with.
func thinObjects(t *testing.T) string {
	t.Helper()
	bin := testprog.LLVMBin()
	testprog.NeedLLVM(t, bin, "clang", "ld.lld")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int b(int);\nint main(void){ return b(2) == 6 ? 0 : 1; }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.c"), []byte("int b(int x){ return x * 3; }\n"), 0o644)
	for _, f := range []string{"a", "b"} {
		cmd := exec.Command(filepath.Join(bin, "clang"), "-O2", "-flto=thin", "-c", f+".c", "-o", f+".o")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Chdir(dir)
	return filepath.Join(bin, "clang")
}

// TestLinkSummaryWallTime: `thindist link`'s summary names the output and
// counts the whole command (reading the link, thin link, backends, final
// link), and its bracket adds up to its time: the phases nest inside the
// run, and what none covers, if it matters, is "other".
func TestLinkSummaryWallTime(t *testing.T) {
	clang := thinObjects(t)
	code, _, errOut := runCLI(t, distributeAll(t), "link", "--progress=never", "--no-cache",
		"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := regexp.MustCompile(`(?m)^thindist: app: 2 jobs, 0 failed, 0 cached, 0 remote, 2 local in (\S+) ` +
		`\((.*)\); slowest [ab]\.o \(\S+\)$`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no summary naming app with its phases in:\n%s", errOut)
	}
	total, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var sum time.Duration
	for _, part := range strings.Split(m[2], ", ") {
		part, _, _ = strings.Cut(part, " including ")
		i := strings.LastIndexByte(part, ' ')
		d, err := time.ParseDuration(part[i+1:])
		if err != nil {
			t.Fatalf("phase %q: %v", part, err)
		}
		names = append(names, part[:i])
		sum += d
	}
	if got := strings.TrimSuffix(strings.Join(names, ", "), ", other"); got != "reading the link, thin link, planning the backends, backends, final link" {
		t.Errorf("phases %s", got)
	}
	// Each figure is rounded (to 1ms below 1s, 10ms below 10s): allow
	// that; "other" is left out below a tenth of the run.
	if slack := 60 * time.Millisecond; sum > total+slack || sum < total-total/10-slack {
		t.Errorf("the run took %v; its bracket adds up to %v:\n%s", total, sum, errOut)
	}
}

// TestLinkTraceNamesOutput: the trace of `thindist link` (written when the
// backends end, before the final link) and the run's record name the link's
// output, as its summary line does; also when the final link fails.
func TestLinkTraceNamesOutput(t *testing.T) {
	clang := thinObjects(t)
	cache := t.TempDir()
	for _, tc := range []struct {
		name  string
		extra []string // link arguments
		code  int
	}{
		{"linked", nil, 0},
		{"final link fails", []string{"-Wl,--defsym=b=undefined_symbol"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace.json")
			args := append([]string{"link", "--progress=never", "--cache-dir", cache, "--trace", trace,
				"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app"}, tc.extra...)
			code, _, errOut := runCLI(t, distributeAll(t), args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			data, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			var tr struct {
				OtherData struct {
					Output string `json:"output"`
					Record string `json:"record"`
				} `json:"otherData"`
			}
			if err := json.Unmarshal(data, &tr); err != nil {
				t.Fatal(err)
			}
			if tr.OtherData.Output != "app" {
				t.Errorf("the trace's output is %q, want app", tr.OtherData.Output)
			}
			run, err := record.Open(cache).Load(tr.OtherData.Record)
			if err != nil {
				t.Fatalf("the trace's record %q: %v", tr.OtherData.Record, err)
			}
			if run.Output != "app" || (run.Error != "") != (tc.code != 0) {
				t.Errorf("the record's output is %q (want app), its error %q", run.Output, run.Error)
			}
		})
	}
}

// TestLinkWithoutBitcodeKeepsNoRecord: a link that thindist runs unchanged
// (no input holds bitcode: Kbuild's `LD --version`, a native link) leaves
// no record, so `thindist report` shows the last ThinLTO link.
func TestLinkWithoutBitcodeKeepsNoRecord(t *testing.T) {
	clang := thinObjects(t)
	cache := t.TempDir()
	env := distributeAll(t)
	link := func(args ...string) {
		t.Helper()
		all := append([]string{"link", "--progress=never", "--cache-dir", cache, "--"}, args...)
		if code, _, errOut := runCLI(t, env, all...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
	}
	link(clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app")
	link(filepath.Join(filepath.Dir(clang), "ld.lld"), "--version")
	if err := exec.Command(clang, "-O2", "-c", "-x", "c", "-o", "native.o", "b.c").Run(); err != nil {
		t.Fatal(err)
	}
	link(clang, "-fuse-ld=lld", "-nostdlib", "-shared", "native.o", "-o", "libnative.so")
	es, err := record.Open(cache).List()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("%d records, want the ThinLTO link's alone", len(es))
	}
	if run, err := record.Open(cache).Load("last"); err != nil || run.Output != "app" {
		t.Errorf("the last record: %v, %v; want the link of app", run, err)
	}
}

// TestSmallLinkLeftToLLDByDefault: with the default --in-process-below, a
// two-module program is left to lld's in-process ThinLTO: thindist says so
// in one line, keeps no record, and a failing link fails with lld's
// message. 0 distributes it; a size that is not one is a usage error.
func TestSmallLinkLeftToLLDByDefault(t *testing.T) {
	clang := thinObjects(t)
	cache := t.TempDir()
	env := map[string]string{"HOME": t.TempDir()}
	link := []string{"--", clang, "-O2", "-flto=thin", "-fuse-ld=lld", "a.o", "b.o", "-o", "app"}
	code, _, errOut := runCLI(t, env, append([]string{"link", "--cache-dir", cache}, link...)...)
	want := regexp.MustCompile(`(?m)^thindist: app: left to lld's in-process ThinLTO \(2 bitcode modules, [0-9.]+ KiB: under --in-process-below=256 KiB\)$`)
	if code != 0 || !want.MatchString(errOut) || strings.Contains(errOut, "jobs") {
		t.Fatalf("exit %d, stderr %q; want the program left to lld, said in one line", code, errOut)
	}
	if err := exec.Command("./app").Run(); err != nil {
		t.Fatalf("the linked program: %v", err)
	}
	if es, _ := record.Open(cache).List(); len(es) != 0 {
		t.Errorf("%d records of a link left to lld, want none", len(es))
	}
	code, _, errOut = runCLI(t, env, append([]string{"link", "--quiet", "--cache-dir", cache}, append(link, "-Wl,--defsym=b=nowhere")...)...)
	if code != 1 || !strings.Contains(errOut, "ld.lld: error: --defsym:1: symbol not found: nowhere") || strings.Contains(errOut, "left to lld") {
		t.Errorf("a failing small link, --quiet: exit %d, stderr %q; want 1 and lld's message, no line of thindist's", code, errOut)
	}
	code, _, errOut = runCLI(t, env, append([]string{"link", "--in-process-below=0", "--cache-dir", cache}, link...)...)
	if code != 0 || !strings.Contains(errOut, "thindist: app: 2 jobs") {
		t.Errorf("--in-process-below=0: exit %d, stderr %q; want it distributed", code, errOut)
	}
	code, _, errOut = runCLI(t, env, append([]string{"link", "--in-process-below=lots"}, link...)...)
	if code != 2 || !strings.Contains(errOut, "--in-process-below") {
		t.Errorf("--in-process-below=lots: exit %d, stderr %q; want a usage error", code, errOut)
	}
}
